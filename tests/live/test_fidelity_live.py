"""Live, against real PyPI: a direct reference, a yanked pin and a marked
override lock as uv locks them, and the locks install with ``uv pip sync``
(uv pip check clean). The oracle for "uv accepts what stacklock writes"."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from stacklock.resolve.locking import ResolveResult, lock_profile, render_resolve
from stacklock.runner import find_uv
from tests.helpers.gitrepo import make_repo
from tests.helpers.uv import python312, uv_compile_pins

pytestmark = pytest.mark.live

SIX_URL = ("https://files.pythonhosted.org/packages/d9/5a/e7c31adbe875f2abbb91bd84cf2"
           "dc52d792b5a01506781dbcf25c91daf11/six-1.16.0-py2.py3-none-any.whl")
TARGET = '[target]\npython = "3.12"\nplatform = "linux_x86_64"\nmanylinux = "2_28"\n'


def _lock(tmp_path: Path, requirements: str) -> tuple[ResolveResult, Path]:
    profile = tmp_path / "live.toml"
    profile.write_text(f"{TARGET}[requirements]\n{requirements}")
    out = tmp_path / "pylock.live.toml"
    result = lock_profile(str(profile), output=out, cache_dir=tmp_path / "cache")
    return result, out


def _sync(lock: Path, tmp_path: Path) -> str:
    """uv installs the lock into a fresh CPython 3.12 venv; uv pip check is clean."""
    venv = tmp_path / "venv"
    env = {**os.environ, "UV_NO_CONFIG": "1"}
    subprocess.run([find_uv(), "venv", "-q", "-p", python312(tmp_path), str(venv)],
                   check=True, env=env)
    python = str(venv / "bin" / "python")
    sync = subprocess.run([find_uv(), "pip", "sync", "--python", python, str(lock)],
                          capture_output=True, text=True, env=env)
    assert sync.returncode == 0, sync.stderr
    check = subprocess.run([find_uv(), "pip", "check", "--python", python],
                           capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    return sync.stderr


def test_a_wheel_by_url_locks_as_an_archive_and_uv_installs_it(tmp_path):
    result, lock = _lock(tmp_path, f'packages = ["six @ {SIX_URL}", '
                                   '"python-dateutil==2.9.0.post0"]\n')
    packages = {p["name"]: p for p in tomllib.loads(lock.read_text())["packages"]}
    assert packages["six"]["archive"]["url"] == SIX_URL
    assert packages["six"]["version"] == "1.16.0"
    uv = uv_compile_pins([f"six @ {SIX_URL}", "python-dateutil==2.9.0.post0"],
                         tmp_path)
    # uv writes the direct reference as "six @ URL", which has no pin to compare
    assert result.resolution.pins() == {**uv, "six": "1.16.0"}
    assert f"six==1.16.0 (from {SIX_URL})" in _sync(lock, tmp_path)


def test_an_exact_pin_on_a_yanked_release_locks_it_as_uv_does(tmp_path):
    result, lock = _lock(tmp_path, 'packages = ["requests==2.32.0"]\n')
    assert "warning: requests 2.32.0 is yanked" in render_resolve(result)
    assert result.resolution.pins() == uv_compile_pins(
        ["requests==2.32.0"], tmp_path)
    assert "requests==2.32.0" in _sync(lock, tmp_path)


def test_an_override_whose_marker_is_false_is_recorded_and_not_applied(tmp_path):
    result, lock = _lock(tmp_path, 'packages = ["requests==2.32.3"]\noverrides = '
                         '["urllib3==1.26.20 ; sys_platform == \'win32\'"]\n')
    stack = tomllib.loads(lock.read_text())["tool"]["stacklock"]
    assert stack["overrides"] == ['urllib3==1.26.20; sys_platform == "win32"']
    assert stack["overrides-ignored"] == stack["overrides"]
    assert result.resolution.pins()["urllib3"].startswith("2.")
    _sync(lock, tmp_path)


def test_a_git_reference_and_a_source_folder_lock_and_uv_installs_them(tmp_path):
    """uv builds both from the lock (setuptools from PyPI): the vcs entry at its
    commit, the directory by its path relative to the lock."""
    repo = tmp_path / "demo"
    first, _ = make_repo(repo)
    _, lock = _lock(tmp_path, f'packages = ["demo-direct @ git+{repo.as_uri()}'
                    '@v0.1.0"]\n')
    assert f"demo-direct==0.1.0 (from git+{repo.as_uri()}@{first})" in _sync(
        lock, tmp_path)
    _, lock = _lock(tmp_path, 'packages = ["demo-direct @ ./demo"]\n')
    assert f"demo-direct==0.2.0 (from {repo.as_uri()})" in _sync(
        lock, tmp_path / "second")
