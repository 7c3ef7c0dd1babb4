"""blackwell-cu130-nightly, a nightly cut-off, and a per-arch JIT cache, resolved
end to end through the CLI on the loopback mirror of tests/helpers/mirror.py, and
what uv makes of the locks.

The nightly index role lists stand-in wheels (tests/data/mirror/pytorch/) in
download.pytorch.org's nightly format: absolute hrefs to a second host, ``%2B``,
no ``#sha256=`` (every file hashed by download), ``data-upload-time``, dev
versions with ``+cu130``. Expectations are read from files.toml, the stand-ins'
bytes and the real flashinfer pages.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from datetime import datetime
from pathlib import Path

import tomlkit
from packaging.pylock import Pylock
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from scripts.record_mirror import NIGHTLY_CUTOFF, scenario_profiles
from stacklock.runner import find_uv
from tests.helpers.mirror import (
    FLASHINFER_ROOT,
    WheelHost,
    resolve_on_mirror,
    serve_mirror,
)
from tests.helpers.standins import pytorch_files
from tests.helpers.uv import python312, uv_dry_run

NIGHTLY = ("torch", "torchvision", "torchaudio", "pytorch-triton")


def _newest_torch(cutoff: datetime | None = None) -> Version:
    """The newest cp312 x86_64 torch of the nightly channel, by files.toml."""
    found = [parse_wheel_filename(f.filename)[1] for f in pytorch_files()
             if f.channel == "nightly/cu130" and f.project == "torch"
             and "cp312-cp312-manylinux_2_28_x86_64" in f.filename
             and (cutoff is None or datetime.fromisoformat(f.upload_time) <= cutoff)]
    return max(found)


def _lock(monkeypatch, tmp_path, mirror, profile, urls):
    host = WheelHost()
    out = tmp_path / "pylock.toml"
    code, _, err = resolve_on_mirror(monkeypatch, tmp_path, profile, urls, host,
                                     "-o", str(out))
    assert code == 0, err
    assert host.refused == []
    data = tomllib.loads(out.read_text())
    Pylock.from_dict(data)
    return out, {p["name"]: p for p in data["packages"]}, data


def test_nightly_takes_the_newest_build_hashed_by_download(monkeypatch, tmp_path,
                                                           sgl_derived):
    with serve_mirror(sgl_root=sgl_derived) as mirror:
        out, packages, _ = _lock(monkeypatch, tmp_path, mirror,
                                 "blackwell-cu130-nightly",
                                 mirror.index_urls(nightly=True, sgl_page="sgl"))
        _sync_pytorch_part(out, tmp_path, packages)  # while the host serves
        downloads, wheel_url = list(mirror.downloads), mirror.wheel_url
    newest = _newest_torch()
    date = re.search(r"dev\d{8}", str(newest))
    assert date is not None and str(newest).endswith("+cu130")
    assert packages["torch"]["version"] == str(newest)
    served = {f.filename: f for f in pytorch_files()}
    for name in NIGHTLY:
        pkg = packages[name]
        (whl,) = pkg["wheels"]
        tool = pkg["tool"]["stacklock"]
        assert (tool["index-name"], tool["hash-source"]) == (
            "pytorch-nightly-cu130", "download"), name
        assert whl["hashes"]["sha256"] == served[whl["name"]].sha256, name
        assert whl["url"] == (f"{wheel_url}/whl/nightly/cu130/"
                              + whl["name"].replace("+", "%2B"))
        assert whl["upload-time"].isoformat().replace("+00:00", "Z") == \
            served[whl["name"]].upload_time
        if name != "pytorch-triton":  # built the same night as torch
            assert date.group() in pkg["version"], name
    # one download per nightly file for its hash, then uv's own fetch of each
    files = sorted(p["wheels"][0]["name"] for n, p in packages.items()
                   if n in NIGHTLY)
    assert sorted(downloads[:len(NIGHTLY)]) == files
    assert sorted(downloads[len(NIGHTLY):]) == files
    # PyPI's triton stays where xgrammar asks for it, held by the constraint
    assert packages["triton"]["version"] == "3.6.0"
    assert "torch==" + str(newest) in uv_dry_run(out, tmp_path, offline=True)


def _sync_pytorch_part(lock: Path, tmp_path: Path, packages: dict) -> None:
    """A real ``uv pip sync --require-hashes`` of the lock's nightly packages
    (the stand-ins: the other wheels are not served whole here) into a new venv,
    fetched from the loopback wheel host by the lock's %2B URLs and checked
    against the sha256 stacklock got by downloading them."""
    doc = tomlkit.parse(lock.read_text())
    kept = tomlkit.aot()
    for pkg in doc["packages"]:
        if pkg["name"] in NIGHTLY:
            pkg.pop("dependencies", None)
            kept.append(pkg)
    doc["packages"] = kept
    part = tmp_path / "pylock.nightly-part.toml"
    part.write_text(tomlkit.dumps(doc))
    venv = tmp_path / "venv"
    env = {"UV_PYTHON_DOWNLOADS": "never", "PATH": "/usr/bin:/bin",
           "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "HOME": str(tmp_path)}
    subprocess.run([find_uv(), "venv", "-q", "--python", python312(tmp_path),
                    str(venv)], check=True, env=env)
    sync = subprocess.run(
        [find_uv(), "pip", "sync", "--preview-features", "pylock", "--require-hashes",
         "--no-build", "--python", str(venv / "bin" / "python"), str(part)],
        capture_output=True, text=True, env=env)
    listed = subprocess.run([find_uv(), "pip", "list", "--format", "freeze", "--python",
                             str(venv / "bin" / "python")],
                            capture_output=True, text=True, env=env).stdout
    assert sync.returncode == 0, sync.stderr
    assert {f"{n}=={packages[n]['version']}" for n in NIGHTLY} <= set(
        listed.split())
    label = venv.glob("lib/python3.12/site-packages/torch_stand_in/STAND-IN.txt")
    assert [p.read_text() for p in label] == ["not the real wheel: a test stand-in\n"]


def test_exclude_newer_picks_the_nightly_of_that_time(monkeypatch, tmp_path,
                                                      sgl_derived):
    """Nightly pages give upload times (data-upload-time): a cut-off reproduces
    the resolution of that moment, older builds still on the index."""
    profile = scenario_profiles(tmp_path)[2][0]  # the one the recording used
    with serve_mirror(sgl_root=sgl_derived) as mirror:
        _, packages, data = _lock(monkeypatch, tmp_path, mirror, profile,
                                  mirror.index_urls(nightly=True, sgl_page="sgl"))
    cutoff = datetime.fromisoformat(NIGHTLY_CUTOFF)
    then = _newest_torch(cutoff)
    assert then < _newest_torch()  # the cut-off excludes today's build
    assert packages["torch"]["version"] == str(then)
    date = re.search(r"dev\d{8}", str(then))
    assert date is not None
    for name in ("torchvision", "torchaudio"):
        assert date.group() in packages[name]["version"], name
    assert data["tool"]["stacklock"]["exclude-newer"] == NIGHTLY_CUTOFF
    for pkg in packages.values():
        when = pkg["wheels"][0].get("upload-time")
        assert when is None or when <= cutoff, pkg["name"]


def test_sm_120_takes_flashinfers_per_arch_jit_cache(monkeypatch, tmp_path):
    """Where the sm_120 project has the version asked for, the lock holds it,
    with the sha256 flashinfer's real page lists for it."""
    profile = tmp_path / "jit.toml"
    profile.write_text(
        '[target]\ngpu-arch = ["sm_120"]\n\n[[index]]\nname = "pypi"\n\n'
        '[[index]]\nname = "flashinfer-cu130"\nurl = "https://flashinfer.ai/whl/cu130"'
        '\npackages = ["flashinfer-jit-cache"]\n\n[gpu-variants.flashinfer-jit-cache]'
        '\nsm_90 = "flashinfer-jit-cache-sm90a"\nsm_120 = "flashinfer-jit-cache-sm120f"'
        '\n\n[requirements]\npackages = ["flashinfer-jit-cache==0.7.0.post1"]\n')
    with serve_mirror() as mirror:
        urls = mirror.index_urls()
        _, packages, data = _lock(monkeypatch, tmp_path, mirror, str(profile), {
            "pypi": urls["pypi"], "flashinfer-cu130": urls["flashinfer-cu130"]})
    (pkg,) = packages.values()
    (whl,) = pkg["wheels"]
    page = (FLASHINFER_ROOT / "cu130" / "flashinfer-jit-cache-sm120f" /
            "index.html").read_text()
    listed = re.findall(re.escape(whl["name"]) + r"#sha256=([0-9a-f]{64})", page)
    assert (pkg["name"], pkg["version"]) == ("flashinfer-jit-cache-sm120f",
                                             "0.7.0.post1+cu130")
    assert whl["name"].endswith("x86_64.whl")
    assert [whl["hashes"]["sha256"]] == listed
    assert pkg["tool"]["stacklock"]["hash-source"] == "index"
    (choice,) = data["tool"]["stacklock"]["gpu-variants"]
    assert choice["chosen"] == "flashinfer-jit-cache-sm120f"
    assert data["tool"]["stacklock"]["requirements"] == [
        "flashinfer-jit-cache==0.7.0.post1"]  # what the profile asked for
