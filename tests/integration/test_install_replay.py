"""A remembered plan, with real uv and wheels from the loopback server: the same
lock on the same interpreter installs again without loading the lock model, and
anything that could change the plan makes install read the lock again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import stacklock.lock.read
from stacklock.codestamp import code_stamp
from stacklock.install.decide import decide
from stacklock.install.interpreter import probe_interpreter
from stacklock.install.plan import make_plan
from stacklock.install.read import read_installable
from stacklock.install.replay import replayable
from stacklock.install.run import install_lock
from stacklock.install.selection import select_packages
from stacklock.lock import Lock, parse_lock
from stacklock.runner import SubprocessRunner
from stacklock.store import ArtifactStore
from tests.helpers.install_server import DATA, Served, local_lock, sha256
from tests.helpers.interpreters import target_interpreter

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of every lock parsed from now on."""
    seen: list[str] = []

    def counted(content: bytes, *, path: str) -> Lock:
        seen.append(path)
        return parse_lock(content, path=path)

    monkeypatch.setattr(stacklock.lock.read, "parse_lock", counted)
    return seen


def _portable(plan: dict[str, object]) -> dict[str, object]:
    """A plan's fields that do not name its venv or generation."""
    return {k: plan[k] for k in ("lock", "python", "packages", "downloads",
                                 "download_bytes", "runfile_command")}


def test_the_same_lock_installs_again_without_reading_it(
    server: tuple[str, Served], tmp_path: Path, parses: list[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    cache = tmp_path / "cache"
    first = install_lock(lock, venv=tmp_path / "a", python=PY, validate=False)
    assert parses == [str(lock)]
    assert len(list((cache / "install-plans").iterdir())) == 1
    second = install_lock(lock, venv=tmp_path / "b", python=PY, validate=False)
    assert parses == [str(lock)]  # replayed: not parsed again
    assert _portable(second.plan.to_dict()) == _portable(first.plan.to_dict())
    uv_lock = tmp_path / "b.stacklock" / "work-1" / "pylock.install.toml"
    assert second.plan.commands[1][-1] == str(uv_lock)
    out = subprocess.run([str(tmp_path / "b" / "bin" / "python"), "-c",
                          "import six, idna; print(idna.__version__)"],
                         check=True, capture_output=True, text=True).stdout
    assert out.strip() == "3.20"
    # validation reads the lock, replayed plan or not
    third = install_lock(lock, venv=tmp_path / "c", python=PY)
    assert parses == [str(lock), str(lock)]
    assert third.validation is not None and third.validation.ok


def test_a_changed_lock_is_read_again(
    server: tuple[str, Served], tmp_path: Path, parses: list[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    install_lock(lock, venv=tmp_path / "a", python=PY, validate=False)
    lock.write_text(lock.read_text("utf-8") + "\n# edited\n", "utf-8")
    install_lock(lock, venv=tmp_path / "b", python=PY, validate=False)
    assert parses == [str(lock), str(lock)]


def test_changed_code_reads_the_lock_again(
    server: tuple[str, Served], tmp_path: Path, parses: list[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    install_lock(lock, venv=tmp_path / "a", python=PY, validate=False)
    data = ROOT / "stacklock" / "data" / "manylinux_sonames.json"  # one of its files
    before = data.stat()
    try:
        os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        code_stamp.cache_clear()
        install_lock(lock, venv=tmp_path / "b", python=PY, validate=False)
    finally:
        os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
        code_stamp.cache_clear()
    assert parses == [str(lock), str(lock)]


def test_a_wheel_now_in_the_store_is_installed_from_there(
    server: tuple[str, Served], tmp_path: Path, parses: list[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    install_lock(lock, venv=tmp_path / "a", python=PY, validate=False)
    wheel = next((DATA / "wheels").glob("six-*.whl"))
    copy = tmp_path / wheel.name
    copy.write_bytes(wheel.read_bytes())
    ArtifactStore(tmp_path / "cache" / "artifacts").adopt(copy, sha256(wheel))
    served.requests.clear()
    second = install_lock(lock, venv=tmp_path / "b", python=PY, validate=False)
    assert parses == [str(lock), str(lock)]
    assert second.plan.local_wheels == {
        sha256(wheel): str(tmp_path / "cache" / "artifacts" / "sha256"
                           / sha256(wheel)[:2] / sha256(wheel))}


def test_a_replayed_plan_is_the_plan_the_lock_gives(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    cache = tmp_path / "cache"
    install_lock(lock, venv=tmp_path / "a", python=PY, validate=False)
    store = ArtifactStore(cache / "artifacts")
    common = {"venv": tmp_path / "b", "uv": "uv", "store": store, "cache": cache,
              "runner": SubprocessRunner(), "toolkit_prefix": None,
              "no_toolkit": False, "link_cuda_at": None, "allow_no_gpu": True,
              "installer_log": tmp_path / "installer.log", "generation": None,
              "content": lock.read_bytes()}
    replayed = decide(lock, PY, replay=True, **common)  # type: ignore[arg-type]
    planned = decide(lock, PY, replay=False, **common)  # type: ignore[arg-type]
    assert replayed.lock is None and planned.lock is not None
    assert replayed.plan == planned.plan


def test_only_plans_uv_carries_alone_are_remembered(tmp_path: Path) -> None:
    interp = probe_interpreter(PY, runner=SubprocessRunner())
    verdicts = {}
    for name in ("pypi-small", "pypi-cu130", "blackwell-cu128"):
        path = ROOT / "locks" / f"pylock.{name}.toml"
        lock = read_installable(path)
        assert lock.target is not None
        plan = make_plan(lock, lock_bytes=path.read_bytes(), venv=tmp_path / "env",
                         interpreter=interp, uv="uv",
                         generation=1, replaces=None, replaced_generation=None,
                         cached={}, toolkit_prefix=None, install_toolkit=True,
                         toolkit_present=False, link_cuda=None, runfile_cached=False,
                         selected=select_packages(lock, target_interpreter(
                             lock.target.python, manylinux=lock.target.manylinux)))
        verdicts[name] = replayable(plan, lock)
    # CUDA wheels (the driver check reads the machine), a runfile toolkit
    assert verdicts == {"pypi-small": True, "pypi-cu130": False,
                        "blackwell-cu128": False}
