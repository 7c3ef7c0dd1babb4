"""uv, run for real: a CPython 3.12 to target, a dry-run install of a lock, and
the pins ``uv pip compile`` chooses (the oracle for stacklock's resolutions)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from scripts._sets import parse_pins
from stacklock.lock import load_lock
from stacklock.runner import find_uv

if TYPE_CHECKING:
    from pathlib import Path


def python312(tmp_path: Path) -> str:
    """A CPython 3.12 to dry-run installs for: an installed one, else one uv
    provides (uv downloads it where the network allows)."""
    pattern = os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")
    found = sorted(glob.glob(pattern))
    found += [p for p in [shutil.which("python3.12")] if p]
    for exe in found:
        ok = subprocess.run([exe, "-c", "import sys; assert sys.version_info[:2] == "
                             "(3, 12)"], capture_output=True).returncode == 0
        if ok:
            return exe
    venv = tmp_path / "py312"
    made = subprocess.run([find_uv(), "venv", "-q", "-p", "3.12", str(venv)],
                          capture_output=True, text=True)
    if made.returncode != 0:  # reported as skipped, never as passed
        pytest.skip("no CPython 3.12 here and uv cannot download one: "
                    + made.stderr.strip().splitlines()[-1])
    return str(venv / "bin" / "python")


def uv_dry_run(lock: Path, tmp_path: Path, *, offline: bool) -> str:
    """uv installs the lock for its own target (pypi-cu130 needs glibc 2.34), into
    an empty venv of a CPython 3.12: what that interpreter has installed (a
    ``pycparser`` of the machine's own) is not in the way, and no uv
    configuration is read."""
    target = load_lock(lock).target
    assert target is not None, f"{lock} has no [tool.stacklock] target"
    platform = f"{target.machine}-manylinux_{target.manylinux}"
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    venv = tmp_path / "empty-py312"
    subprocess.run([find_uv(), "venv", "-q", "--python", python312(tmp_path),
                    str(venv)], check=True, capture_output=True, env=env)
    cmd = [find_uv(), "pip", "install", "--dry-run", "-r", str(lock),
           "--python", str(venv / "bin" / "python"), "--python-platform", platform,
           "--cache-dir", str(tmp_path / "uv-cache")]
    if offline:
        cmd.append("--offline")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr + proc.stdout


def uv_compile_pins(requirements: list[str], folder: Path, *,
                    exclude_newer: str | None = None,
                    manylinux: str = "2_28") -> dict[str, str]:
    """{project: version} as ``uv pip compile`` locks ``requirements`` for
    CPython 3.12 on x86_64 manylinux_``manylinux``, run as scripts/bench_resolve.py
    runs it: no config, no Python download (it resolves for --python-version
    alone)."""
    infile = folder / "requirements.in"
    infile.write_text("\n".join(requirements) + "\n")
    cmd = [find_uv(), "pip", "compile", str(infile), "--python-version", "3.12",
           "--python-platform", f"x86_64-manylinux_{manylinux}", "--no-header",
           "--no-annotate", "--cache-dir", str(folder / "uv-cache"), "--quiet"]
    if exclude_newer:
        cmd += ["--exclude-newer", exclude_newer]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={
        **os.environ, "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"})
    return parse_pins(out.stdout)
