"""Live: the shipped pypi-cu130-sm120 profile's two patches against the real
SGLang 0.5.23 wheel on PyPI (the one locks/pylock.pypi-cu130.toml locks): the
committed lock is what resolving gives today, the patches apply by range reads
of a small part of the 39 MB wheel, and an install of that wheel alone carries
every patched file."""

from __future__ import annotations

import glob
import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from stacklock.cli import main
from stacklock.http import make_http_client
from stacklock.install.interpreter import find_base_python
from stacklock.install.run import install_lock
from stacklock.lock import load_lock
from stacklock.lock.write import dump_lock
from stacklock.profile import load_profile
from stacklock.resolve.hashes import LockedWheel
from stacklock.resolve.patching import apply_declared
from stacklock.resolve.result import Resolution, ResolvedPackage
from stacklock.runner import SubprocessRunner, find_uv
from stacklock.store import ArtifactStore

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
TABLE = "sglang/srt/distributed/device_communicators/all_reduce_utils.py"
FUSION = ("sglang/srt/arg_groups/overrides.py",
          "sglang/srt/layers/flashinfer_comm_fusion.py",
          "sglang/srt/layers/layer_boundary/residual/add_norm.py")


def _sglang() -> tuple[ResolvedPackage, int]:
    """SGLang as the committed pypi-cu130 lock has it, as a resolution would."""
    locked = load_lock(ROOT / "locks" / "pylock.pypi-cu130.toml").package("sglang")
    assert locked is not None and locked.version is not None
    (wheel,) = locked.wheels
    assert wheel.url and wheel.size
    return ResolvedPackage(
        name=canonicalize_name("sglang"), version=locked.version, index_name="pypi",
        index_url="https://pypi.org/simple", dependencies=(),
        wheel=LockedWheel(filename=wheel.filename, url=wheel.url,
                          sha256=wheel.hashes["sha256"], hash_source="index",
                          size=wheel.size)), wheel.size


def _python312() -> str:
    try:
        return find_base_python("3.12", uv=find_uv(), runner=SubprocessRunner())
    except Exception:
        found = sorted(
            glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/python3.12")))
        assert found, "no CPython 3.12 on this machine"
        return found[-1]


def test_the_committed_sm120_lock_is_what_resolving_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``resolve --check`` from cold caches: PyPI's pages, and the patched files
    of the real wheel, give the committed lock's bytes (its patch records
    included)."""
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    assert main(["resolve", "pypi-cu130-sm120", "--check", "--no-check"]) == 0
    assert "locks/pylock.pypi-cu130-sm120.toml is up to date" in \
        capsys.readouterr().out


def test_shipped_sm120_patches_apply_to_the_real_wheel_and_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    profile = load_profile("pypi-cu130-sm120")
    package, size = _sglang()
    lock_path = tmp_path / "locks" / "pylock.sglang-sm120.toml"
    with make_http_client() as http:
        patched = apply_declared(
            Resolution(profile=profile, packages=(package,)), lock=lock_path,
            http=http, store=ArtifactStore(tmp_path / "cache" / "artifacts"),
            offline=False, cache=tmp_path / "cache")
    records = patched.resolution.packages[0].patches
    assert [[f.path for f in r.files] for r in records] == [[TABLE], list(FUSION)]
    assert patched.bytes_read < size / 10  # the members and RECORD, not the wheel
    assert "patch: sglang 0.5.23: patches/sglang-0.5.23-sm120-symm-mem.patch" \
        in patched.lines[0]
    assert "sglang-0.5.23-sm120-allreduce-fusion.patch (3 files)" in patched.lines[1]

    # the wheel alone, installed with the patches (uv pip sync: no dependencies)
    full = load_lock(ROOT / "locks" / "pylock.pypi-cu130.toml")
    sglang = full.package("sglang")
    assert full.stack is not None and sglang is not None
    lock = replace(full, path=str(lock_path), packages=(
        replace(sglang, tool=replace(sglang.tool, patches=records)),),
        stack=replace(full.stack, cuda=None))
    lock_path.parent.mkdir(parents=True)
    dump_lock(lock, lock_path)
    venv = tmp_path / "env"
    result = install_lock(lock_path, venv=venv, python=_python312(), validate=False,
                          allow_no_gpu=True)
    assert sum(n.startswith("patched sglang 0.5.23") for n in result.notes) == 2
    site = next(venv.resolve().glob("lib/python*/site-packages"))
    for record in records:
        for f in record.files:
            assert hashlib.sha256((site / f.path).read_bytes()).hexdigest() == \
                f.sha256
    assert b"    12: {\n        2: 32 * MiB," in (site / TABLE).read_bytes()
    assert b"or get_platform().is_sm120\n" in (site / FUSION[0]).read_bytes()
