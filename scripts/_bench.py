"""What the benchmark scripts share: running a command timed, and finding uv.

Scripts are run as ``python scripts/bench_x.py``, so this module is importable
from them as ``_bench``.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def uv_binary() -> str:
    """The ``uv`` beside the interpreter (the ``uv`` package's), else on PATH."""
    here = Path(sys.executable).with_name("uv")
    return str(here) if here.exists() else (shutil.which("uv") or "uv")


def stacklock_command() -> list[str]:
    return [sys.executable, "-m", "stacklock.cli"]


def timed(cmd: list[str], **kwargs: object) -> tuple[float, float]:
    """Run ``cmd``; (wall seconds, CPU seconds user + system of the child). The
    CPU time is steadier than the wall time on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu
