"""Live: resolve the pypi-small profile from real PyPI, install it, snapshot it,
and diff the snapshot against the lock (empty), then validate."""

from __future__ import annotations

import glob
import subprocess
from pathlib import Path

import pytest

from stacklock.diff import diff_lock_files, render_diff
from stacklock.install.interpreter import find_base_python
from stacklock.install.run import install_lock
from stacklock.resolve.locking import lock_profile
from stacklock.runner import SubprocessRunner, find_uv
from stacklock.snapshot import write_snapshot

pytestmark = pytest.mark.live


def _python312() -> str:
    """uv's discovery first; pyenv's shims can hide a 3.12 from it, so then the
    pyenv versions folder."""
    try:
        return find_base_python("3.12", uv=find_uv(), runner=SubprocessRunner())
    except Exception:
        found = sorted(
            glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/python3.12"))
        )
        assert found, "no CPython 3.12 on this machine (uv python find 3.12 failed)"
        return found[-1]


def test_resolve_install_snapshot_diffs_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)
    lock = lock_profile(
        "pypi-small", output=tmp_path / "pylock.pypi-small.toml",
        cache_dir=tmp_path / "cache",
    ).lock  # fmt: skip
    venv = tmp_path / "env"
    result = install_lock(lock, venv=venv, python=_python312())
    assert result.validation is not None and result.validation.ok, result.validation
    out = subprocess.run(
        [str(venv / "bin/python"), "-c", "import requests, rich, attrs, socks"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    snapshot = write_snapshot(venv, tmp_path / "pylock.snapshot.toml")
    diff = diff_lock_files(lock, snapshot)
    assert not diff.differs, render_diff(diff, "text")
