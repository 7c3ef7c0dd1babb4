"""``pipx install .`` for real: the wheel built from this checkout, installed into
a fresh venv, resolves a built-in profile from an empty directory (real PyPI)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stacklock.uvbin import find_uv
from tests.helpers.data import ROOT

pytestmark = pytest.mark.live


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, check=True)


def test_the_built_wheel_carries_the_profiles_and_resolves_from_anywhere(
        tmp_path: Path) -> None:
    uv = find_uv()
    dist = tmp_path / "dist"
    _run(uv, "build", "--wheel", "--out-dir", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("stacklock-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if n.startswith("stacklock/profiles/")}
    assert {f"stacklock/profiles/{p.name}" for p in (ROOT / "profiles").glob(
        "*.toml")} <= shipped
    venv = tmp_path / "venv"
    _run(uv, "venv", "--python", sys.executable, venv, cwd=tmp_path)
    _run(uv, "pip", "install", "--python", venv / "bin" / "python", wheel,
         cwd=tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    _run(venv / "bin" / "stacklock", "resolve", "pypi-small", cwd=empty)
    lock = empty / "locks" / "pylock.pypi-small.toml"
    assert "name = \"requests\"" in lock.read_text()
