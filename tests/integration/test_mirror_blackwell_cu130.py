"""blackwell-cu130 resolved end to end on a loopback mirror of its four indexes.

``stacklock resolve blackwell-cu130 --index NAME=http://127.0.0.1:PORT/...`` for
every index of the profile, through the CLI, against tests/helpers/mirror.py: real PyPI
pages and range reads (tests/data/mirror/, see its PROVENANCE.md), the real
sgl-kernel and flashinfer cu130 pages, and the PyTorch cu130 index in its real
format (absolute hrefs to a second host, ``%2B``, PEP 658 attributes, upload
times, ``#sha256=`` on some anchors only) listing labelled stand-in wheels.
Expectations come from the recorded data itself (pages, sglang's METADATA,
NVIDIA's runfile tables, the stand-ins' bytes), not from stacklock's output.
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
from packaging.utils import canonicalize_name

from stacklock.profile import load_profile
from stacklock.resolve.locking import lock_profile
from tests.helpers.data import REAL
from tests.helpers.jsonout import parse_output
from tests.helpers.mirror import (
    DATA,
    FLASHINFER_ROOT,
    SGL_ROOT,
    WheelHost,
    is_usable,
    make_mirror_client,
    resolve_on_mirror,
    serve_mirror,
)
from tests.helpers.standins import SGL_FILE, github_wheel, pytorch_files
from tests.helpers.uv import uv_dry_run

PROFILE = load_profile("blackwell-cu130")
SGLANG_METADATA = REAL.parent / "resolve" / "mirror" / "sglang-0.5.9-pypi.METADATA"
PYTORCH_NAMES = {"torch", "torchvision", "torchaudio"}
JIT_FILE = "flashinfer_jit_cache-0.6.4+cu130-cp39-abi3-manylinux_2_28_x86_64.whl"
PHASE = re.compile(r"^stacklock: [a-z ]+ \(from \d+\.\d s\)$")  # a pipe's progress


def _pypi_page(project: str) -> dict:
    return json.loads(gzip.decompress(
        (DATA / "simple" / project / "index.json.gz").read_bytes()))


def _page_hashes(page: Path, filename: str) -> set[str]:
    return set(re.findall(re.escape(filename) + r"#sha256=([0-9a-f]{64})",
                          page.read_text()))


def _runfile_row(path: Path, version: str, platform: str) -> list[str]:
    for line in path.read_text().splitlines():
        cells = line.split("\t")
        if cells[:2] == [version, platform]:
            return cells
    raise AssertionError(f"{path.name}: no {version} {platform} row")


def test_pytorch_pages_have_the_real_anchor_format():
    """A rendered anchor has the shape of the real cu128 torch 2.11.0 anchor
    quoted from download.pytorch.org (tests/data/real/pytorch-index-anchor-
    excerpts): host and names aside, the same attributes in the same order."""
    real = (REAL / "pytorch-index-anchor-excerpts" /
            "cu128-torch-2.11.0_pytorch-issue-181056.html").read_text().rstrip("\n")
    shape = re.escape(real)
    shape = shape.replace(re.escape("https://download-r2.pytorch.org"),
                          r"http://127\.0\.0\.1:\d+")
    shape = re.sub(r"[0-9a-f]{64}", "[0-9a-f]{64}", shape)
    shape = shape.replace("cu128", "cu130").replace("cp310", "cp312")
    shape = shape.replace(re.escape('">torch'),
                          re.escape('" data-upload-time="') + r'[0-9T:\-]+Z">torch')
    with serve_mirror() as mirror:
        import httpx

        page = httpx.get(f"{mirror.url}/whl/cu130/torch/").text
        missing = httpx.get(f"{mirror.url}/whl/cu130/no-such-project/")
    line = next(x for x in page.splitlines()
                if "torch-2.11.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64" in x)
    assert re.fullmatch(shape, line), (shape, line)
    assert page.startswith("<!DOCTYPE html>\n<html>\n  <body>\n")
    assert re.search(r"\n<!--TIMESTAMP \d+-->$", page)  # no trailing newline
    assert missing.status_code == 403 and b"AccessDenied" in missing.content


def test_blackwell_cu130_locks_end_to_end_on_the_mirror(monkeypatch, tmp_path,
                                                        sgl_derived):
    host = WheelHost()
    out = tmp_path / "pylock.blackwell-cu130.toml"
    with serve_mirror(sgl_root=sgl_derived) as mirror:
        urls = mirror.index_urls(sgl_page="sgl")
        code, printed, err = resolve_on_mirror(
            monkeypatch, tmp_path, "blackwell-cu130", urls, host,
            "-o", str(out), "--json")
        first = out.read_bytes()
        # again, cold, through the library with an injected client, ignoring
        # the lock just written (upgrade): the same bytes from scratch
        with make_mirror_client(host) as http:
            lock_profile("blackwell-cu130", output=out, index_urls=urls, http=http,
                         cache_dir=tmp_path / "cache2", check=False, upgrade=True)
        second = out.read_bytes()
        # and cold once more, keeping the lock: its download-settled hashes are
        # kept, so nothing is downloaded (the counts below are unchanged)
        with make_mirror_client(host) as http:
            lock_profile("blackwell-cu130", output=out, index_urls=urls, http=http,
                         cache_dir=tmp_path / "cache3", check=False)
        assert out.read_bytes() == second
        asked, downloads = set(mirror.requested), list(mirror.downloads)
        from_wheel_host = set(mirror.wheel_requests)
        wheel_host = mirror.wheel_url
    assert code == 0, err
    assert {"/simple/sglang/", "/whl/cu130/torch/", "/sgl/sgl-kernel/",
            "/flashinfer/cu130/flashinfer-jit-cache/",
            "/flashinfer/cu130/flashinfer-jit-cache-sm120f/"} <= asked
    assert any(p.startswith("/files/sglang-0.5.9-") for p in asked)
    assert host.refused == []  # nothing left loopback but the stand-in host
    assert first == second  # same inputs, same bytes
    # torch has no #sha256= on its page: one whole download per resolution
    assert downloads == ["torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"] * 2
    assert host.gets == [SGL_FILE] * 2  # sgl-kernel: its hashes disagree

    data = tomllib.loads(first.decode())
    Pylock.from_dict(data)  # a valid PEP 751 file
    packages = {p["name"]: p for p in data["packages"]}
    assert parse_output(printed)["packages"] == len(packages) > 100
    served = {f.filename: f for f in pytorch_files() if f.channel == "cu130"}

    def origin(name: str) -> tuple[str, str, str]:
        pkg = packages[name]
        tool = pkg["tool"]["stacklock"]
        return pkg["version"], tool["index-name"], tool["hash-source"]

    assert origin("torch") == ("2.11.0+cu130", "pytorch-cu130", "download")
    assert origin("torchvision") == ("0.26.0+cu130", "pytorch-cu130", "index")
    assert origin("torchaudio") == ("2.11.0+cu130", "pytorch-cu130", "index")
    for name in PYTORCH_NAMES:
        (whl,) = packages[name]["wheels"]
        stand_in = served[whl["name"]]
        assert whl["url"] == (f"{wheel_host}/whl/cu130/"
                              + whl["name"].replace("+", "%2B"))
        assert whl["hashes"]["sha256"] == stand_in.sha256
        assert whl["upload-time"].isoformat().replace("+00:00", "Z") == \
            stand_in.upload_time
        assert packages[name]["tool"]["stacklock"]["cuda"] == "13.0"
    # METADATA of the PyTorch wheels came from their PEP 658 files
    assert {f"/whl/cu130/{served_name}.metadata" for served_name in (
        packages[n]["wheels"][0]["name"] for n in PYTORCH_NAMES)} <= from_wheel_host
    assert origin("sgl-kernel") == ("0.3.21+cu130", "sgl-kernel-cu130", "download")

    # flashinfer's JIT cache: the generic project, the index's own sha256
    assert origin("flashinfer-jit-cache") == ("0.6.4+cu130", "flashinfer-cu130",
                                              "index")
    (jit,) = packages["flashinfer-jit-cache"]["wheels"]
    page = FLASHINFER_ROOT / "cu130" / "flashinfer-jit-cache" / "index.html"
    assert jit["name"] == JIT_FILE
    assert {jit["hashes"]["sha256"]} == _page_hashes(page, JIT_FILE)
    (choice,) = data["tool"]["stacklock"]["gpu-variants"]
    assert (choice["project"], choice["gpu-arch"], choice["chosen"]) == (
        "flashinfer-jit-cache", ["sm_120"], "flashinfer-jit-cache")
    assert "flashinfer-jit-cache-sm120f" in choice["reason"]
    assert "0.7.0rc3+cu130" in choice["reason"]  # the sm120f page's oldest

    for name, pkg in packages.items():
        (whl,) = pkg["wheels"]
        assert is_usable(whl["name"], PROFILE.target), whl["name"]
        if pkg["tool"]["stacklock"]["index-name"] == "pypi":
            listed = {f["filename"]: f["hashes"]["sha256"]
                      for f in _pypi_page(name)["files"]}
            assert whl["hashes"]["sha256"] == listed[whl["name"]], name
            assert pkg["tool"]["stacklock"]["hash-source"] == "index", name
    _check_overrides_cuda_validate(data, urls)
    # uv accepts the lock for the target (its own reader, offline)
    assert "torch==2.11.0+cu130" in uv_dry_run(out, tmp_path, offline=True)


def _check_overrides_cuda_validate(data: dict, urls: dict) -> None:
    table = data["tool"]["stacklock"]
    overrides = {canonicalize_name(r.name): str(r)
                 for r in PROFILE.requirements.overrides}
    pinned_by_sglang = {
        canonicalize_name(req.name) for req in map(Requirement, _requires_dist())
        if canonicalize_name(req.name) in overrides}
    assert pinned_by_sglang == set(overrides)  # all five are sglang's pins
    by_sglang = {canonicalize_name(Requirement(a["original"]).name): a["override"]
                 for a in table["overrides-applied"] if a["package"] == "sglang"}
    assert by_sglang == overrides
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
    gate = table["validate"]["gate"]
    assert table["validate"]["min-gpus"] == 8
    assert gate["server-args"][:2] == ["--tp", "8"]
    assert "lightseekorg/kimi-k2.5-eagle3" in gate["speculative-args"]
    assert gate["env"] == {"SGLANG_ENABLE_SPEC_V2": "1"}


def _requires_dist() -> list[str]:
    lines = SGLANG_METADATA.read_text("utf-8").splitlines()
    return [line.split(":", 1)[1].strip() for line in lines
            if line.startswith("Requires-Dist:")]


def test_unchanged_sgl_page_fails_listing_its_real_hashes(monkeypatch, tmp_path):
    """The real page lists the chosen file under several hashes and the stand-in
    is none of them: resolution must refuse, name them all, and write no lock."""
    host = WheelHost()
    out = tmp_path / "pylock.toml"
    with serve_mirror() as mirror:
        code, _, err = resolve_on_mirror(monkeypatch, tmp_path, "blackwell-cu130",
                                         mirror.index_urls(), host, "-o", str(out))
    real = _page_hashes(SGL_ROOT / "cu130" / "sgl-kernel" / "index.html", SGL_FILE)
    assert len(real) >= 3
    assert code == 2
    # one line for the error; before it, a pipe's phase lines (a slow run's)
    [error] = [line for line in err.splitlines() if not PHASE.match(line)]
    assert error.startswith("stacklock: error:") and SGL_FILE in error
    wheel = github_wheel(SGL_FILE)
    assert wheel is not None
    assert set(re.findall(r"[0-9a-f]{64}", err)) == real | {
        hashlib.sha256(wheel).hexdigest()}
    assert not out.exists()
    assert host.refused == []


@pytest.mark.parametrize(("where", "said"), [
    ("whl/nightly/cu130", "HTTP 403"), ("loop/simple", "redirect loop")])
def test_403_and_redirect_loop_are_one_line_naming_the_url(monkeypatch, tmp_path,
                                                           where, said):
    """The PyTorch index answers 403 for a project it does not have; a
    misconfigured proxy may redirect a page to itself."""
    profile = tmp_path / "missing.toml"
    profile.write_text('[[index]]\nname = "pytorch"\nurl = "https://x.invalid"\n'
                       'packages = ["torchx-not-here"]\n\n[requirements]\n'
                       'packages = ["torchx-not-here"]\n')
    with serve_mirror() as mirror:
        url = f"{mirror.url}/{where}"
        code, _, err = resolve_on_mirror(monkeypatch, tmp_path, str(profile),
                                         {"pytorch": url}, WheelHost())
    assert code == 2
    assert err.count("\n") == 1 and said in err
    assert f"{url}/torchx-not-here/" in err
    assert "Traceback" not in err and "credential" not in err.lower()
    assert "netrc" not in err


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
