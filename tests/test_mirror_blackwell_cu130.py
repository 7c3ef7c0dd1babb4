"""blackwell-cu130 resolved end to end on a loopback mirror of all three indexes.

``stacklock resolve blackwell-cu130 --index NAME=http://127.0.0.1:PORT/...`` for
every index of the profile, through the CLI, against tests/helpers/mirror.py serving
tests/data/mirror/ (real PyPI pages and range reads, recorded and trimmed by
scripts/record_mirror.py; see its PROVENANCE.md) and the real sgl-kernel cu130
page. github.com, where that page's wheels live, answers with a labelled stand-in
wheel; any other host is refused. The PyTorch role holds PyPI's cu130 torch builds
(2.11 onwards), so the profile's ``torch>=2.11.0.dev0,<2.12`` takes the newest 2.11
build among them, as it would take the newest 2.11 nightly on the real index.
Expectations come from the recorded data itself (pages, sglang's METADATA, NVIDIA's
runfile tables), not from stacklock's output.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest
from packaging.pylock import Pylock
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from stacklock import cli
from stacklock.profile import load_profile
from stacklock.resolve.locking import lock_profile
from tests.helpers.data import REAL
from tests.helpers.mirror import (
    DATA,
    SGL_ROOT,
    WheelHost,
    derived_index,
    is_usable,
    make_mirror_client,
    serve_mirror,
    stand_in_wheel,
)

PROFILE = load_profile("blackwell-cu130")
SGL_FILE = "sgl_kernel-0.3.21+cu130-cp312-abi3-manylinux2014_x86_64.whl"
SGLANG_METADATA = REAL.parent / "resolve" / "mirror" / "sglang-0.5.9-pypi.METADATA"
PYTORCH_NAMES = {"torch", "torchvision", "torchaudio"}


def _pypi_page(project: str) -> dict:
    return json.loads(gzip.decompress(
        (DATA / "simple" / project / "index.json.gz").read_bytes()))


def _pytorch_versions(project: str) -> list[Version]:
    html = (DATA / "whl" / "cu130" / project / "index.html").read_text()
    return [parse_wheel_filename(name)[1]
            for name in re.findall(r">([^<>]+\.whl)</a>", html)]


def _real_sgl_hashes() -> set[str]:
    page = (SGL_ROOT / "cu130" / "sgl-kernel" / "index.html").read_text()
    return set(re.findall(re.escape(SGL_FILE) + r"#sha256=([0-9a-f]{64})", page))


def _runfile_row(path: Path, version: str, platform: str) -> list[str]:
    for line in path.read_text().splitlines():
        cells = line.split("\t")
        if cells[:2] == [version, platform]:
            return cells
    raise AssertionError(f"{path.name}: no {version} {platform} row")


@pytest.fixture
def wheel() -> bytes:
    return stand_in_wheel()  # zip timestamps: build once per test


def test_mirror_pages_hold_only_wheels_the_target_can_use():
    pages = sorted((DATA / "simple").glob("*/index.json.gz"))
    assert len(pages) > 100  # sglang 0.5.9's closure, not a toy
    for page in pages:
        for entry in _pypi_page(page.parent.name)["files"]:
            assert is_usable(entry["filename"], PROFILE.target), entry["filename"]
            assert re.fullmatch(r"[0-9a-f]{64}", entry["hashes"]["sha256"])
            assert entry["url"] == "../../files/" + entry["url"].rsplit("/", 1)[1]
    for project in PYTORCH_NAMES:
        assert _pytorch_versions(project), project
    assert (SGL_ROOT / "cu130" / "sgl-kernel" / "index.html").is_file()


def test_blackwell_cu130_locks_end_to_end_on_the_mirror(monkeypatch, capsys,
                                                        tmp_path, wheel):
    sha = hashlib.sha256(wheel).hexdigest()
    derived = Path(derived_index(tmp_path, sha))  # the real page + one anchor
    host = WheelHost(wheel)
    out = tmp_path / "pylock.blackwell-cu130.toml"
    with serve_mirror(sgl_root=derived) as mirror:
        urls = mirror.index_urls(sgl_page="sgl")
        monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setattr("stacklock.resolve.resolution.make_http_client",
                            lambda **kw: make_mirror_client(host, **kw))
        # --no-check: the mirror serves a stand-in for the sgl-kernel wheel's bytes
        argv = ["resolve", "blackwell-cu130", "-o", str(out), "--json", "--no-check"]
        for name, url in urls.items():
            argv += ["--index", f"{name}={url}"]
        code = cli.main(argv)
        printed = capsys.readouterr()
        first = out.read_bytes()
        # again, cold, through the library with an injected client
        with make_mirror_client(host) as http:
            lock_profile("blackwell-cu130", output=out, index_urls=urls, http=http,
                         cache_dir=tmp_path / "cache2", check=False)
        second = out.read_bytes()
        asked = set(mirror.requested)
    assert code == 0, printed.err
    # all three indexes, and METADATA by range reads, over loopback
    assert {"/simple/sglang/", "/whl/cu130/torch/", "/sgl/sgl-kernel/"} <= asked
    assert any(p.startswith("/whl/cu130/torch-") for p in asked)
    assert any(p.startswith("/files/sglang-0.5.9-") for p in asked)
    assert host.refused == []  # nothing left loopback but the stand-in host
    assert first == second  # same inputs, same bytes

    data = tomllib.loads(first.decode())
    Pylock.from_dict(data)  # a valid PEP 751 file
    summary = json.loads(printed.out)
    packages = {p["name"]: p for p in data["packages"]}
    assert summary["packages"] == len(packages) > 100

    def origin(name: str) -> tuple[str, str]:
        pkg = packages[name]
        return pkg["version"], pkg["tool"]["stacklock"]["index-name"]

    profile = load_profile("blackwell-cu130")
    torch_spec = next(r.specifier for r in profile.requirements.overrides
                      if r.name == "torch")
    newest_torch = max(torch_spec.filter(_pytorch_versions("torch"),
                                         prereleases=True))
    assert origin("torch") == (str(newest_torch), "pytorch-nightly-cu130")
    assert packages["torch"]["index"] == urls["pytorch-nightly-cu130"]
    assert packages["torch"]["wheels"][0]["url"].startswith(
        mirror.url + "/whl/cu130/torch-")
    assert packages["torch"]["tool"]["stacklock"]["cuda"] == "13.0"
    assert origin("sgl-kernel") == ("0.3.21+cu130", "sgl-kernel-cu130")
    assert packages["sgl-kernel"]["tool"]["stacklock"]["cuda"] == "13.0"
    assert origin("flashinfer-python") == ("0.6.4", "pypi")
    assert origin("sglang") == ("0.5.9", "pypi")
    for name, pkg in packages.items():
        index = pkg["tool"]["stacklock"]["index-name"]
        if name in PYTORCH_NAMES:
            assert index == "pytorch-nightly-cu130", name
        elif name != "sgl-kernel":
            assert index == "pypi", name

    # every wheel: one sha256, the page's own where the page names one file once
    for name, pkg in packages.items():
        (whl,) = pkg["wheels"]
        assert is_usable(whl["name"], PROFILE.target), whl["name"]
        digest = whl["hashes"]["sha256"]
        assert re.fullmatch(r"[0-9a-f]{64}", digest), name
        if pkg["tool"]["stacklock"]["index-name"] == "pypi":
            listed = {f["filename"]: f["hashes"]["sha256"]
                      for f in _pypi_page(name)["files"]}
            assert digest == listed[whl["name"]], name
            assert pkg["tool"]["stacklock"]["hash-source"] == "index", name
    sgl = packages["sgl-kernel"]
    assert sgl["wheels"][0]["name"] == SGL_FILE
    assert sgl["wheels"][0]["hashes"]["sha256"] == sha
    assert sgl["tool"]["stacklock"]["hash-source"] == "download"
    assert host.gets == 2  # one hashing download per resolution, no more

    # the overrides that replaced sglang 0.5.9's own pins (its real METADATA)
    table = data["tool"]["stacklock"]
    overrides = {canonicalize_name(r.name): str(r)
                 for r in PROFILE.requirements.overrides}
    pinned_by_sglang = {
        canonicalize_name(req.name) for req in map(Requirement, _requires_dist())
        if canonicalize_name(req.name) in overrides}
    assert pinned_by_sglang == set(overrides)  # all five are sglang's pins
    by_sglang = {canonicalize_name(Requirement(a["original"]).name): a["override"]
                 for a in table["overrides-applied"]
                 if a["package"] == "sglang"}
    assert by_sglang == overrides
    assert sorted(table["overrides"]) == sorted(overrides.values())

    # the CUDA toolkit: NVIDIA's 13.0.1 runfile, as the real tables give it
    cuda = table["cuda"]
    _, _, sha256, url = _runfile_row(REAL / "spack-cuda-runfile-sha256.tsv",
                                     "13.0.1", "Linux-x86_64")
    _, _, runfile, md5, size, _ = _runfile_row(
        REAL / "nvidia-runfile-md5-size-rwgk-catalog.tsv", "13.0.1", "linux-amd64")
    assert (cuda["version"], cuda["source"]) == ("13.0.1", "runfile")
    assert (cuda["runfile"], cuda["url"]) == (runfile, url)
    assert (cuda["sha256"], cuda["md5"], cuda["size"]) == (sha256, md5, int(size))
    assert table["indexes"] == [{"name": i.name, "url": urls[i.name]}
                                for i in PROFILE.indexes]


def _requires_dist() -> list[str]:
    lines = SGLANG_METADATA.read_text("utf-8").splitlines()
    return [line.split(":", 1)[1].strip() for line in lines
            if line.startswith("Requires-Dist:")]


def test_unchanged_sgl_page_fails_listing_its_real_hashes(monkeypatch, capsys,
                                                          tmp_path, wheel):
    """The real page lists the chosen file under several hashes and the stand-in
    is none of them: resolution must refuse, name them all, and write no lock."""
    host = WheelHost(wheel)
    out = tmp_path / "pylock.toml"
    with serve_mirror() as mirror:
        monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setattr("stacklock.resolve.resolution.make_http_client",
                            lambda **kw: make_mirror_client(host, **kw))
        argv = ["resolve", "blackwell-cu130", "-o", str(out)]
        for name, url in mirror.index_urls().items():
            argv += ["--index", f"{name}={url}"]
        code = cli.main(argv)
    err = capsys.readouterr().err
    real = _real_sgl_hashes()
    assert len(real) >= 3
    assert code == 2
    assert err.count("\n") == 1 and SGL_FILE in err
    assert set(re.findall(r"[0-9a-f]{64}", err)) == real | {
        hashlib.sha256(wheel).hexdigest()}
    assert not out.exists()
    assert host.refused == []


def test_blanked_tail_keeps_what_a_metadata_reader_reads():
    """scripts/record_mirror.py zeroes the compressed file data in recorded
    suffix reads; the directory and METADATA must come through unchanged."""
    import io
    import os
    import zipfile

    from scripts.record_mirror import _Sparse, blank_unread

    meta = SGLANG_METADATA.read_bytes()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/blob.bin", os.urandom(200_000))  # incompressible data
        zf.writestr("pkg-1.0.dist-info/METADATA", meta)
        zf.writestr("pkg-1.0.dist-info/RECORD", "pkg/blob.bin,,\n")
    whole = buf.getvalue()
    start = len(whole) - 65536
    tail = blank_unread(whole[start:], start, len(whole))
    assert len(tail) == 65536 and tail != whole[start:]
    kept = len(tail) - len(tail.lstrip(b"\0"))
    assert tail[kept:] == whole[start + kept:]  # one real run up to the end
    with zipfile.ZipFile(_Sparse(tail, start, len(whole))) as zf:
        assert zf.read("pkg-1.0.dist-info/METADATA") == meta
        with pytest.raises(zipfile.BadZipFile):
            zf.read("pkg/blob.bin")  # its bytes are gone, as intended
