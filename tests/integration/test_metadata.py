"""MetadataFetcher and parse_wheel_metadata, on recorded real range answers and on
real zip files that the tests build with zipfile."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import struct
import zipfile
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from packaging.utils import parse_wheel_filename

from stacklock.errors import MetadataError
from stacklock.http import Retry
from stacklock.index.pages import Link
from stacklock.metadata import MetadataFetcher, parse_wheel_metadata
from stacklock.store import ArtifactStore
from tests.helpers.ranges import range_response

if TYPE_CHECKING:
    from collections.abc import Callable

RECORDED = Path(__file__).resolve().parents[1] / "data" / "metadata"
WHEELS = sorted(p.name for p in RECORDED.iterdir() if p.is_dir())


NO_WAIT = Retry(sleep=lambda _s: None)


class Recorded:
    """Serves a recorded wheel: a Range is answered only from recorded bytes."""

    def __init__(self, folder: Path) -> None:
        self.info = json.loads((folder / "ranges.json").read_text())
        self.segments = []
        for seg in self.info["segments"]:
            first = int(re.findall(r"\d+", seg["content-range"])[0])
            self.segments.append((first, (folder / seg["file"]).read_bytes()))
        self.size = self.info["size"]
        self.requests: list[str | None] = []

    def link(self) -> Link:
        return Link(
            filename=self.info["filename"],
            url=self.info["url"],
            sha256=self.info["sha256"],
            size=self.size,
        )

    def __call__(self, request: httpx.Request) -> httpx.Response:
        spec = request.headers.get("range", "")
        self.requests.append(spec)
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", spec)
        if match is None:
            return httpx.Response(500, text="the recording has no whole file")
        first, last = match.groups()
        start = self.size - int(last) if first == "" else int(first)
        end = self.size - 1 if first == "" else int(last)
        start = max(start, 0)
        for seg_start, data in self.segments:
            if seg_start <= start and end < seg_start + len(data):
                body = data[start - seg_start : end - seg_start + 1]
                headers = {"content-range": f"bytes {start}-{end}/{self.size}"}
                return httpx.Response(206, headers=headers, content=body)
        return httpx.Response(416, headers={"content-range": f"bytes */{self.size}"})


def fetcher_for(
    handler: Callable[[httpx.Request], httpx.Response],
    cache: Path,
    *,
    offline: bool = False,
) -> MetadataFetcher:
    http = httpx.Client(transport=httpx.MockTransport(handler))
    return MetadataFetcher(http, cache_dir=cache, offline=offline, retry=NO_WAIT)


@pytest.mark.parametrize("wheel", WHEELS)
def test_recorded_real_wheels_read_by_range(wheel: str, tmp_path: Path) -> None:
    server = Recorded(RECORDED / wheel)
    fetcher = fetcher_for(server, tmp_path)
    meta = fetcher.get(server.link())
    name, version, _build, _tags = parse_wheel_filename(wheel)
    assert (meta.name, meta.version) == (name, version)
    assert meta.raw == (RECORDED / wheel / "METADATA").read_bytes()
    recorded = sum(len(data) for _start, data in server.segments)
    assert fetcher.bytes_read == recorded
    assert len(server.requests) == len(server.segments)
    assert server.requests[0] == "bytes=-65536"


def test_torch_needs_only_two_small_reads(tmp_path: Path) -> None:
    (folder,) = (RECORDED / w for w in WHEELS if w.startswith("torch-"))
    server = Recorded(folder)
    tail = server.segments[0][1]
    count, cd_size = struct.unpack("<HI", tail[-12:-6])
    # The recorded torch directory is far larger than the tail that was read...
    assert count > 5000 and cd_size > len(tail)
    fetcher = fetcher_for(server, tmp_path)
    meta = fetcher.get(server.link())
    # ...yet METADATA came from two reads totalling well under 1 MB.
    assert len(server.requests) == 2
    assert fetcher.bytes_read < 100_000 < server.size
    names = {r.name for r in meta.requires_dist}
    assert "filelock" in names
    assert any(n.startswith(("nvidia-", "cuda-")) for n in names)
    assert meta.requires_python is not None


def make_wheel(
    name: str = "demo",
    version: str = "1.0",
    *,
    members: int = 3,
    metadata_first: bool = False,
    meta_name: str | None = None,
    zip64: bool = False,
) -> tuple[str, bytes]:
    """A real wheel written by zipfile: filename and bytes."""
    filename = f"{name}-{version}-py3-none-any.whl"
    metadata = (
        f"Metadata-Version: 2.1\nName: {meta_name or name}\nVersion: {version}\n"
        "Requires-Python: >=3.9\nRequires-Dist: filelock>=3\n"
        'Requires-Dist: numpy; extra == "np"\nProvides-Extra: np\n'
    ).encode()
    dist_info = [
        (f"{name}-{version}.dist-info/METADATA", metadata),
        (f"{name}-{version}.dist-info/WHEEL", b"Wheel-Version: 1.0\n"),
    ]
    payload = [
        (f"{name}/module_{i:05d}_with_a_long_enough_name.py", os.urandom(200))
        for i in range(members)
    ]
    ordered = dist_info + payload if metadata_first else payload + dist_info
    buf = io.BytesIO()
    with pytest.MonkeyPatch.context() as patch:
        if zip64:  # zipfile's own ZIP64 writer, at sizes a test can afford
            patch.setattr(zipfile, "ZIP64_LIMIT", 1000)
            patch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
            for member, data in ordered:
                archive.writestr(member, data)
    return filename, buf.getvalue()


class WheelServer:
    """A real file server for one wheel: honours Range unless told not to."""

    def __init__(self, data: bytes, *, ranges: bool = True) -> None:
        self.data = data
        self.ranges = ranges
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.ranges:
            return httpx.Response(200, content=self.data)
        return range_response(request, self.data)


def link_for(filename: str, data: bytes | None = None, **kw: object) -> Link:
    sha = hashlib.sha256(data).hexdigest() if data is not None else None
    url = f"https://user:s3cret@files.example.org/w/{filename}"
    return Link(filename=filename, url=url, sha256=sha, **kw)  # type: ignore[arg-type]


def test_built_wheel_metadata_at_the_end(tmp_path: Path) -> None:
    filename, data = make_wheel(members=2000)
    server = WheelServer(data)
    fetcher = fetcher_for(server, tmp_path)
    meta = fetcher.get(link_for(filename, data))
    assert str(meta.version) == "1.0"
    assert [str(r) for r in meta.requires_dist] == [
        "filelock>=3",
        'numpy; extra == "np"',
    ]
    assert meta.provides_extra == ("np",)
    assert str(meta.requires_python) == ">=3.9"
    assert fetcher.bytes_read < len(data) // 4


def test_built_wheel_metadata_first_reads_the_whole_directory(tmp_path: Path) -> None:
    filename, data = make_wheel(members=2000, metadata_first=True)
    server = WheelServer(data)
    fetcher = fetcher_for(server, tmp_path)
    meta = fetcher.get(link_for(filename, data))
    assert meta.raw == zipfile.ZipFile(io.BytesIO(data)).read(
        "demo-1.0.dist-info/METADATA"
    )
    assert len(server.requests) >= 3  # tail, rest of the directory, member
    assert fetcher.bytes_read < len(data)


def test_zip64_wheel(tmp_path: Path) -> None:
    filename, data = make_wheel(members=20, zip64=True)
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data
    fetcher = fetcher_for(WheelServer(data), tmp_path)
    meta = fetcher.get(link_for(filename, data))
    assert meta.raw == zipfile.ZipFile(io.BytesIO(data)).read(
        "demo-1.0.dist-info/METADATA"
    )


def test_server_ignoring_range_falls_back_to_one_download(tmp_path: Path) -> None:
    filename, data = make_wheel(members=50)
    server = WheelServer(data, ranges=False)
    fetcher = fetcher_for(server, tmp_path)
    link = link_for(filename, data, size=len(data))
    meta = fetcher.get(link)
    assert meta.name == "demo"
    assert fetcher.bytes_read == len(data)
    assert ArtifactStore(tmp_path / "artifacts").has(link.sha256 or "")
    # A new cache for metadata, same store: METADATA comes from the stored wheel.
    again = MetadataFetcher(
        httpx.Client(transport=httpx.MockTransport(server)),
        cache_dir=tmp_path / "other",
        store=ArtifactStore(tmp_path / "artifacts"),
        retry=NO_WAIT,
    )
    before = len(server.requests)
    assert again.get(link).raw == meta.raw
    assert again.bytes_read == 0 and len(server.requests) == before


def test_server_refusing_suffix_ranges_gets_an_explicit_one(tmp_path: Path) -> None:
    filename, data = make_wheel(members=300)
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["range"])
        if request.headers["range"].startswith("bytes=-"):
            return httpx.Response(416)
        return range_response(request, data)

    link = link_for(filename, data, size=len(data))
    assert fetcher_for(handler, tmp_path).get(link).name == "demo"
    assert seen[:2] == ["bytes=-65536", f"bytes={len(data) - 65536}-{len(data) - 1}"]


def test_flaky_server_is_retried(tmp_path: Path) -> None:
    filename, data = make_wheel(members=300)
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return httpx.Response(503)
        if calls == 2:
            raise httpx.ReadTimeout("timed out", request=request)
        return range_response(request, data)

    fetcher = fetcher_for(handler, tmp_path)
    assert fetcher.get(link_for(filename, data)).name == "demo"
    assert calls == 3  # the 503 and the timeout were each retried


def test_pep658_file_good_and_bad_hash(tmp_path: Path) -> None:
    filename, data = make_wheel()
    raw = zipfile.ZipFile(io.BytesIO(data)).read("demo-1.0.dist-info/METADATA")
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        if request.url.path.endswith(".metadata"):
            return httpx.Response(200, content=raw)
        return range_response(request, data)

    good = link_for(
        filename, data, metadata=True, metadata_sha256=hashlib.sha256(raw).hexdigest()
    )
    fetcher = fetcher_for(handler, tmp_path / "a")
    assert fetcher.get(good).raw == raw
    assert paths == [f"/w/{filename}.metadata"] and fetcher.bytes_read == len(raw)

    bad = link_for(filename, data, metadata=True, metadata_sha256="0" * 64)
    with pytest.raises(MetadataError) as caught:
        fetcher_for(handler, tmp_path / "b").get(bad)
    assert "sha256" in str(caught.value) and "s3cret" not in str(caught.value)
    assert not list((tmp_path / "b").rglob("*.metadata"))


def test_pep658_missing_file_falls_back_to_ranges(tmp_path: Path) -> None:
    filename, data = make_wheel()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(".metadata"):
            return httpx.Response(404)
        return range_response(request, data)

    meta = fetcher_for(handler, tmp_path).get(link_for(filename, data, metadata=True))
    assert meta.name == "demo"


def test_truncated_response_caches_nothing(tmp_path: Path) -> None:
    filename, data = make_wheel(members=500)

    def handler(request: httpx.Request) -> httpx.Response:
        response = range_response(request, data)
        cut = response.content[: len(response.content) // 2]
        return httpx.Response(206, headers=response.headers, content=cut)

    with pytest.raises(MetadataError) as caught:
        fetcher_for(handler, tmp_path).get(link_for(filename, data))
    message = str(caught.value)
    assert "truncated" in message
    assert "files.example.org/w/demo-1.0" in message and "s3cret" not in message
    assert not list(tmp_path.rglob("*.metadata"))


def test_a_content_range_of_thousands_of_digits_is_one_short_error(
        tmp_path: Path) -> None:
    # int() refuses over 4,300 digits (ValueError): a crafted header was a traceback
    filename, data = make_wheel()
    huge = "bytes 0-" + "9" * 5000 + "/100"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(206, headers={"content-range": huge}, content=b"x")

    with pytest.raises(MetadataError) as caught:
        fetcher_for(handler, tmp_path).get(link_for(filename, data))
    assert "bad Content-Range 'bytes 0-999" in str(caught.value)
    assert len(str(caught.value)) < 600


@pytest.mark.parametrize(("status", "hint"),
                         [(404, "--refresh"), (401, "netrc"), (403, "refuses")])
def test_http_errors_name_the_redacted_url(
    tmp_path: Path, status: int, hint: str
) -> None:
    filename, data = make_wheel()
    with pytest.raises(MetadataError) as caught:
        fetcher_for(lambda request: httpx.Response(status), tmp_path).get(
            link_for(filename, data)
        )
    message = str(caught.value)
    assert f"HTTP {status}" in message and hint in message
    assert "user:***@files.example.org/w/demo-1.0" in message
    assert "s3cret" not in message


def test_cache_second_get_reads_no_network(tmp_path: Path) -> None:
    filename, data = make_wheel(members=100)
    fetcher_for(WheelServer(data), tmp_path).get(link_for(filename, data))

    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"network used for {request.url}")

    for offline in (False, True):
        warm = fetcher_for(refuse, tmp_path, offline=offline)
        assert warm.get(link_for(filename, data)).name == "demo"
        assert warm.bytes_read == 0


def test_offline_without_cache_says_so(tmp_path: Path) -> None:
    filename, data = make_wheel()
    with pytest.raises(MetadataError) as caught:
        fetcher_for(WheelServer(data), tmp_path, offline=True).get(
            link_for(filename, data)
        )
    assert "not cached" in str(caught.value) and "--offline" in str(caught.value)


def test_link_without_sha256_is_cached_by_url(tmp_path: Path) -> None:
    filename, data = make_wheel()
    server = WheelServer(data)
    link = link_for(filename)
    fetcher_for(server, tmp_path).get(link)
    entries = list((tmp_path / "metadata").rglob("*.metadata"))
    assert len(entries) == 1 and entries[0].name.startswith("url-")
    count = len(server.requests)
    assert fetcher_for(server, tmp_path).get(link).name == "demo"
    assert len(server.requests) == count


def test_threads_racing_share_one_entry(tmp_path: Path) -> None:
    filename, data = make_wheel(members=200)
    link = link_for(filename, data)
    server = WheelServer(data)
    shared = fetcher_for(server, tmp_path)

    def one(i: int) -> bytes:
        # Half use one fetcher (one fetch per key), half their own (racing writes).
        fetcher = shared if i % 2 else fetcher_for(server, tmp_path)
        return fetcher.get(link).raw

    with ThreadPoolExecutor(8) as pool:
        results = set(pool.map(one, range(16)))
    assert len(results) == 1
    files = [p for p in (tmp_path / "metadata").rglob("*") if p.is_file()]
    assert [p.name for p in files] == [f"{link.sha256}.metadata"]


def _fetch_in_process(cache: str, filename: str, data: bytes) -> bytes:
    fetcher = fetcher_for(WheelServer(data), Path(cache))
    return fetcher.get(link_for(filename, data)).raw


def test_processes_racing_write_the_same_entry(tmp_path: Path) -> None:
    filename, data = make_wheel(members=200)
    with ProcessPoolExecutor(2) as pool:
        jobs = [
            pool.submit(_fetch_in_process, str(tmp_path), filename, data)
            for _ in range(4)
        ]
        results = {job.result() for job in jobs}
    assert len(results) == 1
    files = [p for p in (tmp_path / "metadata").rglob("*") if p.is_file()]
    assert len(files) == 1 and files[0].read_bytes() in results


def test_name_mismatch_is_an_error(tmp_path: Path) -> None:
    filename, data = make_wheel(meta_name="other")
    with pytest.raises(MetadataError) as caught:
        fetcher_for(WheelServer(data), tmp_path).get(link_for(filename, data))
    assert "other" in str(caught.value)
    assert not list(tmp_path.rglob("*.metadata"))


def test_parse_keeps_local_versions_and_checks_them() -> None:
    raw = RECORDED / next(w for w in WHEELS if w.startswith("torch-")) / "METADATA"
    text = raw.read_bytes()
    found = re.search(rb"^Version: (.+)$", text, re.M)
    assert found is not None
    version = found.group(1).decode()
    local = text.replace(
        f"Version: {version}".encode(), f"Version: {version}+cu130".encode()
    )
    meta = parse_wheel_metadata(
        local, f"torch-{version}+cu130-cp312-cp312-linux_x86_64.whl"
    )
    assert meta.version.local == "cu130"
    with pytest.raises(MetadataError):
        parse_wheel_metadata(local, f"torch-{version}-cp312-cp312-linux_x86_64.whl")


def test_parse_tolerates_real_world_quirks() -> None:
    raw = (
        b"Metadata-Version: 2.1\nName: Demo_Pkg\nVersion: 1.0\n"
        b"License-Expression: MIT\nX-Unknown-Field: yes\n"
        b"Requires-Dist: foo (>=1.0)\nProvides-Extra: Some_Extra\n"
    )
    meta = parse_wheel_metadata(raw, "demo_pkg-1.0-py3-none-any.whl")
    assert meta.name == "demo-pkg"
    assert [str(r.specifier) for r in meta.requires_dist] == [">=1.0"]
    assert meta.provides_extra == ("some-extra",)


def test_parse_rejects_a_broken_requirement() -> None:
    raw = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: x >=>= 1\n"
    with pytest.raises(MetadataError) as caught:
        parse_wheel_metadata(raw, "demo-1.0-py3-none-any.whl")
    assert "demo-1.0-py3-none-any.whl" in str(caught.value)


@pytest.mark.live
def test_live_torch_metadata_by_range(tmp_path: Path) -> None:
    from scripts.bench_metadata import WHEELS as LIVE_WHEELS
    from scripts.bench_metadata import find_wheel

    pattern = dict(LIVE_WHEELS)["torch"]
    with httpx.Client(timeout=60, follow_redirects=True) as http:
        link = find_wheel(http, "torch", pattern)
        assert link.size is not None and link.size > 100_000_000
        fetcher = MetadataFetcher(http, cache_dir=tmp_path)
        meta = fetcher.get(link)
    names = {r.name for r in meta.requires_dist}
    assert "filelock" in names
    assert any(n.startswith(("nvidia-", "cuda-")) for n in names)
    assert fetcher.bytes_read < 1_000_000
