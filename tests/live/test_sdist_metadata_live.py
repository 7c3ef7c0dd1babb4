"""Live: the metadata of sdists against real PyPI, for the cases of issue 28.

- dbt-core 1.12.6: its one sdist-only dependency (dbt-core-experimental-parser)
  has a static pyproject.toml; the lock must equal ``uv pip compile``'s and
  build nothing.
- scipy on a ``manylinux = "2_17"`` target: 1.18.1 has no wheel for it; its and
  numpy's dependencies come from their sdists without meson or gfortran; the
  lock equals uv's (scipy 1.18.1 with numpy 2.5.5).
- numba 0.57.0 on a 3.12 target: with a CPython 3.12 its metadata build says it
  cannot install on 3.12; with only a failing pyenv shim, stacklock refuses in one
  line. Never a lock built on the host's 3.11.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from stacklock.resolve.locking import lock_profile
from tests.helpers.uv import python312, uv_compile_pins

pytestmark = pytest.mark.live


def _profile(folder: Path, name: str, packages: list[str],
             manylinux: str = "2_28") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        f'[target]\npython = "3.12"\nplatform = "linux_x86_64"\n'
        f'manylinux = "{manylinux}"\n[requirements]\n'
        f"packages = [{', '.join(repr(p) for p in packages)}]\n".replace("'", '"'))
    return path


def _sdists(lock: Path) -> dict[str, str]:
    data = tomllib.loads(lock.read_text())
    return {p["name"]: p["tool"]["stacklock"]["metadata"]
            for p in data["packages"] if "sdist" in p}


def test_dbt_core_locks_like_uv_without_a_build(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.dbt.toml"
    result = lock_profile(str(_profile(tmp_path, "dbt", ["dbt-core==1.12.6"])),
                          output=lock, cache_dir=tmp_path / "cache")
    assert result.resolution.pins() == uv_compile_pins(["dbt-core==1.12.6"],
                                                       tmp_path)
    assert _sdists(lock) == {
        "dbt-core-experimental-parser": "pyproject.toml [project] (PEP 621)"}


def test_scipy_on_manylinux_2_17_locks_like_uv(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.scipy.toml"
    result = lock_profile(str(_profile(tmp_path, "scipy", ["scipy==1.18.1"],
                                       manylinux="2_17")),
                          output=lock, cache_dir=tmp_path / "cache")
    pins = result.resolution.pins()
    assert pins == {"scipy": "1.18.1", "numpy": "2.5.5"}
    assert pins == uv_compile_pins(["scipy==1.18.1"], tmp_path, manylinux="2_17")
    made = _sdists(lock)
    assert set(made) == {"scipy", "numpy"}
    assert not any(how.startswith("PEP 517") for how in made.values())


def _resolve_cli(profile: Path, tmp_path: Path, path: str
                 ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacklock", "resolve", str(profile), "-o",
         str(tmp_path / "out.toml")],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "PATH": path,
             "STACKLOCK_CACHE_DIR": str(tmp_path / "cache"),
             "UV_PYTHON_INSTALL_DIR": str(tmp_path / "no-managed")})


def test_numba_on_3_12_builds_on_3_12_or_refuses(tmp_path: Path) -> None:
    profile = _profile(tmp_path, "numba", ["numba==0.57.0"])
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3.12"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\n"
                    "exit 127\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    host = Path(sys.executable).resolve().parent
    refused = _resolve_cli(profile, tmp_path, f"{shims}:{host}:/usr/bin:/bin")
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert lines[0].startswith("stacklock: error: no Python 3.12 to build sdists' "
                               "metadata with:")
    assert "pyenv: python3.12: command not found" in lines[0]
    assert not (tmp_path / "out.toml").exists()

    python = Path(python312(tmp_path))  # skips, saying why, if none here
    built = _resolve_cli(profile, tmp_path,
                         f"{python.parent}:{shims}:{host}:/usr/bin:/bin")
    lines = [ln for ln in built.stderr.splitlines() if ln.strip()]
    assert built.returncode == 2 and len(lines) == 1, built.stderr
    assert "preparing numba's metadata failed (RuntimeError: Cannot install on " \
           "Python version 3.12" in lines[0]
    assert not (tmp_path / "out.toml").exists()
