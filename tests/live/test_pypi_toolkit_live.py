"""Live: a ``[cuda] source = "pypi"`` toolkit from real PyPI, installed with
``stacklock install --allow-no-gpu`` on a machine without a GPU, as an image build
does: exit 0, the ``toolkit`` check finds CUDA_HOME and nvcc inside the venv, what
needs a driver is skipped with its reason, and the installed nvcc compiles a kernel.

Worth the download: only the real wheels say where nvcc lands and whether it runs
(tests/integration/test_validate_toolkit.py replays their recorded layout offline).
It is
kept small: cuda-toolkit[nvcc]==13.0.3 alone (five wheels, 101 MB, no torch),
downloaded once into ``$STACKLOCK_LIVE_CACHE`` (default ``~/.cache/stacklock-live``,
the cache tests/live/test_native_live.py uses); warm, the install takes a few seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.resolve.locking import lock_profile
from tests.helpers.jsonout import parse_output
from tests.helpers.uv import python312

pytestmark = pytest.mark.live

LIVE = Path(os.environ.get("STACKLOCK_LIVE_CACHE",
                           Path.home() / ".cache" / "stacklock-live"))
PROFILE = (Path(__file__).resolve().parents[1] / "data" / "cuda"
           / "cuda-toolkit-nvcc.toml")
KERNEL = "__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n"


def _no_gpu() -> bool:
    return not (Path("/proc/driver/nvidia/version").exists()
                or shutil.which("nvidia-smi"))


@pytest.mark.skipif(not _no_gpu(), reason="this machine has an NVIDIA driver")
def test_pypi_toolkit_installs_without_a_gpu(tmp_path: Path) -> None:
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(LIVE / "stacklock"),
           "UV_CACHE_DIR": str(LIVE / "uv"), "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("STACKLOCK_DRIVER_VERSION", None)
    lock = tmp_path / "pylock.cuda-toolkit-nvcc.toml"
    lock_profile(str(PROFILE), output=lock, cache_dir=LIVE / "stacklock")
    venv = tmp_path / "env"
    proc = subprocess.run(
        [sys.executable, "-m", "stacklock", "install", str(lock), "--venv", str(venv),
         "--python", python312(tmp_path), "--allow-no-gpu", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = parse_output(proc.stdout)
    checks = {c["name"]: c for c in result["validation"]["checks"]}
    toolkit = checks["toolkit"]
    assert toolkit["status"] == "pass", toolkit
    home = Path(toolkit["details"]["cuda_home"])
    assert home.parent.parent.name == "site-packages" and home.name == "cu13"
    assert home.resolve().is_relative_to(venv.resolve())
    assert toolkit["details"]["nvcc"] == str(home / "bin" / "nvcc")
    assert toolkit["reason"].startswith("CUDA 13.0.3 from wheels: nvcc 13.0.88 "
                                        "(nvidia-cuda-nvcc 13.0.88) at ")
    assert checks["driver"]["status"] == "skip"
    assert checks["driver"]["reason"].startswith("no driver here (--allow-no-gpu)")
    assert not [c for c in checks.values() if c["status"] == "fail"]
    assert all(c["reason"] for c in checks.values() if c["status"] == "skip")
    # the activation file's CUDA_HOME and PATH give a compiler that builds a kernel
    (tmp_path / "twice.cu").write_text(KERNEL)
    assert shutil.which("gcc"), "nvcc needs a host compiler to preprocess"
    built = subprocess.run(
        ["bash", "-c", f". {venv / 'stacklock-activate.sh'} && echo $CUDA_HOME && "
         "nvcc -arch=sm_90 -ptx twice.cu -o twice.ptx"],
        capture_output=True, text=True, cwd=tmp_path, check=False)
    assert built.returncode == 0, built.stderr
    assert Path(built.stdout.strip()).resolve() == home.resolve()
    ptx = (tmp_path / "twice.ptx").read_text()
    assert ".target sm_90" in ptx and "_Z5twicePf" in ptx
