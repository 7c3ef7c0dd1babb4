"""An sdist's metadata: PKG-INFO read from the front of real sdists answered the
way a file server answers Range (or ignores it), PEP 643 trust, the cache, and
the diagnosis of a real failed build. Data: tests/data/sdist/ (PROVENANCE.md)."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from stacklock.errors import MetadataError
from stacklock.http import Retry
from stacklock.index.links import Link
from stacklock.metadata import MetadataFetcher
from stacklock.metadata.build import BuildSetup, SdistBuildError, diagnose_build_log
from stacklock.metadata.pkg_info import parse_pkg_info, untrusted_reason
from stacklock.metadata.pyproject import static_project_metadata
from stacklock.metadata.sdist import FROM_PYPROJECT, SdistReader
from stacklock.metadata.sdist_archive import read_remote_pkg_info
from stacklock.runner import find_uv
from stacklock.store import ArtifactStore
from tests.helpers.ranges import range_response

DATA = Path(__file__).resolve().parents[1] / "data" / "sdist"
NVD3 = "python-nvd3-0.16.0.tar.gz"  # setuptools: PKG-INFO among the first members
REQUESTS = "requests-2.32.3.tar.gz"  # 131 KB, PKG-INFO in its first 28 KB
TOMLI = "tomli-2.5.0.tar.gz"  # flit: PKG-INFO is the last member
ZIP = "wincertstore-0.2.1.zip"


@dataclass
class Served:
    """The sdists of tests/data/sdist at ``url``; ``ranges`` records each
    request's Range header ("" for none)."""

    url: str = "https://files.example.org"
    ranges: list[str] = field(default_factory=list)
    honour_range: bool = True

    def client(self) -> httpx.Client:
        def answer(request: httpx.Request) -> httpx.Response:
            self.ranges.append(request.headers.get("range", ""))
            path = DATA / request.url.path.rsplit("/", 1)[-1]
            if not path.is_file():
                return httpx.Response(404)
            if not self.honour_range:
                return httpx.Response(200, content=path.read_bytes())
            return range_response(request, path.read_bytes())

        return httpx.Client(transport=httpx.MockTransport(answer))


def _read(served: Served, filename: str, **kwargs: int) -> tuple[bytes | None, int]:
    got: list[int] = []
    with served.client() as http:
        raw = read_remote_pkg_info(http, f"{served.url}/{filename}", filename,
                                   on_bytes=got.append, **kwargs)
    return raw, sum(got)


def test_pkg_info_near_the_front_is_read_by_one_range() -> None:
    size = (DATA / REQUESTS).stat().st_size
    served = Served()
    raw, read = _read(served, REQUESTS)
    assert raw is not None and raw.startswith(b"Metadata-Version: 2.1\nName: requests")
    assert served.ranges == ["bytes=0-65535"] and read == 65536 < size


def test_a_short_first_read_goes_on_with_the_rest_as_a_stream() -> None:
    served = Served()
    raw, _ = _read(served, NVD3, first=4096)
    assert raw is not None and b"\nName: python-nvd3\n" in raw
    # the first range, then the rest streamed (closed once PKG-INFO went by)
    assert served.ranges == ["bytes=0-4095", "bytes=4096-"]


def test_pkg_info_at_the_end_reads_the_whole_sdist() -> None:
    size = (DATA / TOMLI).stat().st_size
    served = Served()
    raw, read = _read(served, TOMLI, first=4096)
    assert raw is not None and read == size
    meta = parse_pkg_info(raw, TOMLI)
    assert (meta.name, str(meta.version)) == ("tomli", "2.5.0")
    assert str(meta.requires_python) == ">=3.8"
    assert untrusted_reason(raw) is None  # Metadata-Version 2.5, nothing dynamic


def test_a_server_ignoring_range_is_read_as_a_stream() -> None:
    served = Served(honour_range=False)
    raw, _ = _read(served, NVD3)
    assert raw is not None and b"Name: python-nvd3" in raw


def test_a_5xx_on_the_first_range_is_tried_again() -> None:
    served = Served()
    answers = iter([httpx.Response(503), httpx.Response(502)])
    body = (DATA / NVD3).read_bytes()

    def flaky(request: httpx.Request) -> httpx.Response:
        served.ranges.append(request.headers.get("range", ""))
        return next(answers, None) or range_response(request, body)

    waits: list[float] = []
    with httpx.Client(transport=httpx.MockTransport(flaky)) as http:
        raw = read_remote_pkg_info(http, f"{served.url}/{NVD3}", NVD3,
                                   on_bytes=lambda n: None,
                                   retry=Retry(sleep=waits.append, random=lambda: 0.5))
    assert raw is not None and b"\nName: python-nvd3\n" in raw
    assert served.ranges == ["bytes=0-65535"] * 3 and waits == [0.5, 1.0]


def test_zip_sdist_is_read_by_range_requests() -> None:
    served = Served()
    raw, read = _read(served, ZIP)
    assert raw is not None and b"Name: wincertstore" in raw
    assert served.ranges[0] == "bytes=-65536" and read >= len(raw)


def test_pep_643_trust() -> None:
    flash = (DATA / "flash_attn-2.8.3.PKG-INFO").read_bytes()
    assert untrusted_reason(flash) == (
        "PKG-INFO marks requires-dist, requires-python as dynamic")
    served = Served()
    nvd3, _ = _read(served, NVD3)
    assert nvd3 is not None
    assert untrusted_reason(nvd3) == (
        "PKG-INFO is Metadata-Version 2.1 (before 2.2, PEP 643)")


def test_pkg_info_of_another_project_is_refused() -> None:
    served = Served()
    raw, _ = _read(served, TOMLI)
    assert raw is not None
    with pytest.raises(MetadataError, match=r"METADATA says tomli 2\.5\.0"):
        parse_pkg_info(raw, "tomlkit-2.5.0.tar.gz")


def _link(url: str, filename: str) -> Link:
    body = (DATA / filename).read_bytes()
    return Link(filename=filename, url=f"{url}/{filename}",
                sha256=hashlib.sha256(body).hexdigest(), size=len(body))


def _fetcher(http: httpx.Client, cache: Path, **kwargs: bool) -> MetadataFetcher:
    sdists = SdistReader(http, cache_dir=cache, setup=None)
    return MetadataFetcher(http, cache_dir=cache, sdists=sdists, **kwargs)


def test_fetcher_uses_trusted_pkg_info_and_caches_it(tmp_path: Path) -> None:
    served = Served()
    with served.client() as http:
        link = _link(served.url, TOMLI)
        fetcher = _fetcher(http, tmp_path)
        meta = fetcher.get(link)
        assert (meta.name, str(meta.version)) == ("tomli", "2.5.0")
        before = len(served.ranges)
        again = _fetcher(http, tmp_path, offline=True)
        assert again.get(link).raw == meta.raw
        assert len(served.ranges) == before  # read from the cache


def test_untrusted_pkg_info_needs_a_build(tmp_path: Path) -> None:
    served = Served()
    with served.client() as http:
        with pytest.raises(MetadataError, match=r"Metadata-Version 2\.1 .*building "
                           "sdists is turned off"):
            _fetcher(http, tmp_path).get(_link(served.url, NVD3))


def test_a_failed_build_is_one_line_and_the_sdist_is_fetched_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uv offline with an empty cache: the build environment cannot get setuptools
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    setup = BuildSetup(uv=find_uv(), python=sys.executable,
                       log_dir=tmp_path / "logs", build_requires={})
    served = Served()
    with served.client() as http:
        reader = SdistReader(http, cache_dir=tmp_path, setup=setup)
        with pytest.raises(SdistBuildError) as info:
            reader.read(_link(served.url, NVD3))
    message = str(info.value)
    assert message.startswith(
        "python-nvd3-0.16.0.tar.gz: preparing python-nvd3's metadata failed (")
    assert "\n" not in message and info.value.needs is None
    assert "uv pip install" in info.value.log.read_text()
    # read whole by the first range (34 KB), stored from those bytes: one request
    assert served.ranges == ["bytes=0-65535"]
    sha = hashlib.sha256((DATA / NVD3).read_bytes()).hexdigest()
    assert ArtifactStore(tmp_path / "artifacts").has(sha)


def test_offline_without_cache_says_so(tmp_path: Path) -> None:
    with httpx.Client() as http:
        fetcher = _fetcher(http, tmp_path, offline=True)
        with pytest.raises(MetadataError, match=r"not cached.*without --offline"):
            fetcher.get(_link("http://127.0.0.1:9", TOMLI))


def test_a_real_failed_build_is_diagnosed() -> None:
    log = (DATA / "build-flash_attn-2.8.3.log").read_text()
    assert diagnose_build_log(log) == "torch at build time"
    assert diagnose_build_log("error: Microsoft Visual C++ 14.0 is required") is None


def test_a_streamed_sdist_longer_than_it_said_is_cut(tmp_path: Path) -> None:
    """The second, streamed range of a .tar.gz stops at the size the first
    answer declared: a server that keeps sending is cut, not read forever."""
    from stacklock.http import BodyTooLarge

    head = bytes(65536)

    def handler(request: httpx.Request) -> httpx.Response:
        spec = request.headers["range"]
        if spec == "bytes=0-65535":
            return httpx.Response(206, content=head, headers={
                "content-range": "bytes 0-65535/70000"})
        endless = iter([bytes(4096)] * 100)  # far more than the 4464 bytes left
        return httpx.Response(206, content=endless, headers={
            "content-range": "bytes 65536-69999/70000"})

    from stacklock.metadata.sdist_archive import ForwardReader

    with httpx.Client(transport=httpx.MockTransport(handler)) as http, \
            ForwardReader(http, "https://files.example.org/x-1.0.tar.gz",
                          on_bytes=lambda n: None) as reader, \
            pytest.raises(BodyTooLarge, match="passed 70000 bytes"):
        while reader.read(65536):
            pass


DBT_PARSER = "dbt_core_experimental_parser-2.0.8.tar.gz"  # pyproject.toml first


def test_static_pyproject_stands_in_for_an_old_pkg_info(tmp_path: Path) -> None:
    """dbt-core 1.12.6's sdist-only dependency: PKG-INFO 2.1 (not trusted), a
    static [project] table (PEP 621), and an in-tree backend never run."""
    served = Served()
    with served.client() as http:
        link = _link(served.url, DBT_PARSER)
        reader = SdistReader(http, cache_dir=tmp_path, setup=None)
        fetcher = MetadataFetcher(http, cache_dir=tmp_path, sdists=reader)
        meta = fetcher.get(link)
    assert (meta.name, str(meta.version)) == ("dbt-core-experimental-parser", "2.0.8")
    assert meta.requires_dist == () and str(meta.requires_python) == ">=3.9"
    assert reader.how(link) == FROM_PYPROJECT and reader.built == []


def test_scipy_pyproject_gives_its_dependencies() -> None:
    """scipy 1.18.1's real members (meson-python): PKG-INFO 2.1 cannot be
    trusted, its pyproject.toml's [project] can."""
    pkg_info = (DATA / "scipy-1.18.1.PKG-INFO").read_bytes()
    assert untrusted_reason(pkg_info) == (
        "PKG-INFO is Metadata-Version 2.1 (before 2.2, PEP 643)")
    raw = static_project_metadata((DATA / "scipy-1.18.1.pyproject.toml").read_bytes(),
                                  project="scipy", version="1.18.1")
    assert isinstance(raw, bytes)
    meta = parse_pkg_info(raw, "scipy-1.18.1.tar.gz")
    assert str(meta.requires_python) == ">=3.12"
    plain = [str(r) for r in meta.requires_dist if r.marker is None]
    assert plain == ["numpy<2.8,>=2.0.0"]
    assert "test" in meta.provides_extra
    extras = [r for r in meta.requires_dist if r.marker is not None]
    assert extras and all(
        any(str(r.marker).endswith(f'extra == "{x}"') for x in meta.provides_extra)
        for r in extras)
    assert not any(r.marker.evaluate({"extra": ""}) for r in extras)


def _faithful_scipy(folder: Path) -> Path:
    """A .tar.gz of scipy's two real members, pyproject.toml first and PKG-INFO
    last as in the real sdist, 1 MB of incompressible source between them."""
    import io
    import os
    import tarfile

    path = folder / "scipy-1.18.1.tar.gz"
    members = [("pyproject.toml", (DATA / "scipy-1.18.1.pyproject.toml").read_bytes()),
               ("scipy/_lib/blob.bin", os.urandom(1 << 20)),
               ("PKG-INFO", (DATA / "scipy-1.18.1.PKG-INFO").read_bytes())]
    with tarfile.open(path, "w:gz") as archive:
        for name, body in members:
            info = tarfile.TarInfo(f"scipy-1.18.1/{name}")
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return path


def test_a_static_pyproject_stops_the_read_before_pkg_info(tmp_path: Path) -> None:
    sdist = _faithful_scipy(tmp_path)
    body = sdist.read_bytes()

    def answer(request: httpx.Request) -> httpx.Response:
        return range_response(request, body)

    link = Link(filename=sdist.name, url=f"https://files.example.org/{sdist.name}",
                sha256=hashlib.sha256(body).hexdigest(), size=len(body))
    with httpx.Client(transport=httpx.MockTransport(answer)) as http:
        reader = SdistReader(http, cache_dir=tmp_path / "cache", setup=None)
        raw = reader.read(link)
    assert reader.how(link) == FROM_PYPROJECT
    assert b"Requires-Dist: numpy<2.8,>=2.0.0" in raw
    assert reader.bytes_read < len(body) // 2  # PKG-INFO, at the end, never read


def test_a_dynamic_pyproject_field_is_not_used() -> None:
    text = (DATA / "scipy-1.18.1.pyproject.toml").read_text()
    dynamic = text.replace("[project]\n", '[project]\ndynamic = ["dependencies"]\n', 1)
    assert static_project_metadata(dynamic.encode(), project="scipy",
                                   version="1.18.1") == (
        "pyproject.toml [project] lists dependencies as dynamic")
    assert static_project_metadata(b"[build-system]\n", project="scipy",
                                   version="1.18.1") == (
        "pyproject.toml has no [project] table")
