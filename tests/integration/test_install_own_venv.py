"""install never replaces the environment stacklock runs from: a README example
(``--venv .venv`` in the checkout the quickstart set up) used to swap out the
running command's own venv, killing it mid-way with ``No module named 'httpx'``.
Each case runs a real stacklock from a real venv (stacklock on its path through
a ``.pth`` file) against itself: exit 2, one line, nothing made or changed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.install.run import install_lock
from tests.helpers.install_server import Served, local_lock, tree_state
from tests.helpers.wheelkit import make_venv

PY = sys.executable


def _with_stacklock(python: Path) -> Path:
    """``python``'s venv sees this checkout's stacklock and its dependencies."""
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    (site / "stacklock-tests.pth").write_text(
        "\n".join(p for p in sys.path if p and os.path.isdir(p)) + "\n")
    return python


def _install(python: Path, lock: Path, venv: Path, tmp_path: Path,
             *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(
        [str(python), "-m", "stacklock", "install", str(lock), "--venv", str(venv),
         "--python", PY, "--no-validate", *options],
        env=env, capture_output=True, text=True, timeout=300, check=False)


def _refused(done: subprocess.CompletedProcess[str], running: Path) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert f"({os.path.realpath(running)})" in done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


@pytest.mark.parametrize("where", ["itself", "inside"])
def test_a_plain_venv_is_not_replaced_by_the_stacklock_running_from_it(
        where: str, server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / ".venv"
    python = _with_stacklock(make_venv(venv))
    before = tree_state(tmp_path)
    target = venv if where == "itself" else venv / "envs" / "ml"
    line = _refused(_install(python, lock, target, tmp_path), venv)
    assert ("stacklock runs from this environment" if where == "itself" else
            "lies inside the environment stacklock runs from") in line
    assert tree_state(tmp_path) == before  # no .venv.stacklock, no head start
    assert served.requests == []  # uv never started
    # the same for a dry run: its plan could not run
    _refused(_install(python, lock, target, tmp_path, "--dry-run"), venv)
    # another path is fine
    done = _install(python, lock, tmp_path / "ml-env", tmp_path, "--dry-run")
    assert done.returncode == 0, done.stderr


def test_a_managed_venv_is_not_replaced_through_its_link_or_a_generation(
        server: tuple[str, Served], tmp_path: Path) -> None:
    """``.venv`` installed by stacklock (a link to ``.venv.stacklock/1``):
    stacklock running through the link, or from generation 1 itself (how one
    recovers a venv replaced before), refuses to install into ``.venv``."""
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / ".venv"
    install_lock(lock, venv=venv, python=PY, validate=False, cache=tmp_path / "c")
    generation = tmp_path / ".venv.stacklock" / "1"
    _with_stacklock(generation / "bin" / "python")
    served.requests.clear()
    edited = tmp_path / "pylock.edited.toml"
    edited.write_text(lock.read_text() + "\n# another lock: a new generation\n")
    before = tree_state(tmp_path)
    for python in (venv / "bin" / "python", generation / "bin" / "python"):
        _refused(_install(python, edited, venv, tmp_path), generation)
        assert tree_state(tmp_path) == before
    assert served.requests == []
    assert os.readlink(venv) == ".venv.stacklock/1"
