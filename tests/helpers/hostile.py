"""What the hostile-input corpus's tests share: stacklock run as a user runs it
(a subprocess, this checkout's code, no network but loopback) and the one way a
refusal must look."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from tests.helpers.data import ROOT

if TYPE_CHECKING:
    from pathlib import Path


def hostile_env(tmp_path: Path, **more: str) -> dict[str, str]:
    """The environment: caches under ``tmp_path``, this checkout's stacklock
    whatever the working directory, every proxy a dead port but loopback's."""
    env = dict(os.environ)
    env.pop("STACKLOCK_NATIVE_FACTS", None)
    env["STACKLOCK_CACHE_DIR"] = str(tmp_path / "cache")
    env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    env["PYTHONPATH"] = str(ROOT)
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"  # no network
    env["NO_PROXY"] = "127.0.0.1"  # but the loopback servers
    env.update(more)
    return env


def run_cli(*args: str, env: dict[str, str], cwd: Path = ROOT,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stacklock.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          check=False, env=env)


def refused(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, no traceback, one line on stderr (under 1,000 characters) holding
    each of ``needles``; that line."""
    assert result.returncode == 2, (result.returncode, result.stdout,
                                    result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert len(lines[0]) < 1000, len(lines[0])
    return lines[0]
