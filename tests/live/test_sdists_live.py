"""Live: projects that publish no wheel, against real PyPI.

apache-airflow 2.10.4 needs python-nvd3, which ships only an sdist: stacklock's
pins must equal ``uv pip compile``'s (run as scripts/bench_resolve.py runs it),
``no-build = true`` must refuse it in one line naming python-nvd3, and a small
profile holding python-nvd3 must install into a real venv (uv builds exactly that
sdist), import, and validate. Worth the network: airflow's resolution is the
case that failed before (136 packages, a few MB of pages and metadata), and the
install is the only oracle for "uv builds exactly the locked sdists".
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from stacklock.install.run import install_lock
from stacklock.resolve.locking import lock_profile
from tests.helpers.uv import python312, uv_compile_pins

pytestmark = pytest.mark.live

TARGET = '[target]\npython = "3.12"\nplatform = "linux_x86_64"\nmanylinux = "2_28"\n'


@pytest.fixture(autouse=True)
def _python312_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """python-nvd3's metadata is built on the target's CPython 3.12, found on PATH
    as uv finds one (a pyenv shim that cannot run 3.12 is refused, never
    replaced by this 3.11)."""
    found = Path(python312(tmp_path))  # skips, saying why, if there is none
    monkeypatch.setenv("PATH", f"{found.parent}{os.pathsep}{os.environ['PATH']}")


def _profile(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(TARGET + body)
    return path


def test_airflow_pins_equal_uv_and_no_build_refuses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    profile = _profile(tmp_path, "airflow",
                       '[requirements]\npackages = ["apache-airflow==2.10.4"]\n')
    result = lock_profile(str(profile), output=tmp_path / "pylock.airflow.toml",
                          cache_dir=cache)
    pins = {str(p.name): str(p.version) for p in result.resolution.packages}
    assert pins == uv_compile_pins(["apache-airflow==2.10.4"], tmp_path)
    data = tomllib.loads((tmp_path / "pylock.airflow.toml").read_text())
    built = {p["name"]: p for p in data["packages"] if "sdist" in p}
    assert list(built) == ["python-nvd3"]
    nvd3 = built["python-nvd3"]
    assert nvd3["sdist"]["name"] == "python-nvd3-0.16.0.tar.gz"
    assert len(nvd3["sdist"]["hashes"]["sha256"]) == 64 and nvd3["sdist"]["size"] > 0
    assert nvd3["tool"]["stacklock"]["build"] == (
        "python-nvd3 0.16.0 publishes no wheel, only an sdist")

    refused = _profile(tmp_path, "airflow-no-build",
                       '[requirements]\npackages = ["apache-airflow==2.10.4"]\n'
                       "no-build = true\n")
    run = subprocess.run(
        [sys.executable, "-m", "stacklock", "resolve", str(refused),
         "-o", str(tmp_path / "refused.toml")],
        capture_output=True, text=True,
        env={**os.environ, "STACKLOCK_CACHE_DIR": str(cache)},
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert "python-nvd3 has no wheel that fits the target" in lines[0]
    assert "no-build refuses building it" in lines[0]
    assert not (tmp_path / "refused.toml").exists()


def test_sdist_only_project_installs_builds_and_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(cache))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)  # where nothing may be written unasked
    profile = _profile(tmp_path, "nvd3",
                       '[requirements]\npackages = ["python-nvd3==0.16.0"]\n'
                       '[validate]\nimports = ["nvd3"]\n')
    lock = tmp_path / "pylock.nvd3.toml"
    lock_profile(str(profile), output=lock, cache_dir=cache)
    venv = tmp_path / "env"
    result = install_lock(lock, venv=venv, python=python312(tmp_path))
    sync = next(c for c in result.plan.commands if "sync" in c)
    assert "--only-binary" in sync and sync[sync.index("--no-binary") + 1] == (
        "python-nvd3")
    out = subprocess.run([str(venv / "bin/python"), "-c",
                          "import nvd3; print(nvd3.lineChart.__name__)"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "lineChart", out.stderr
    assert result.validation is not None and result.validation.ok
    checks = {c.name: c for c in result.validation.checks}
    assert checks["wheel-hashes"].details["built_from_source"] == ["python-nvd3"]
    assert checks["import:nvd3"].status == "pass"
