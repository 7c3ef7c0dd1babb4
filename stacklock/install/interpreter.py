"""The interpreter a new venv is built from: found by uv, asked about itself.

The venv's python, not the one running stacklock, decides which wheels fit, so
it runs a small probe (version, machine, glibc, marker environment). Its answer
is remembered per binary under ``<cache>/interpreters/``: a warm install then
starts no second interpreter.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from stacklock._fs import atomic_write_bytes
from stacklock.bounded import parse_json
from stacklock.errors import InstallError
from stacklock.install.early import find_base_python
from stacklock.install.inputs import Interpreter
from stacklock.pyenv import marker_env_code

if TYPE_CHECKING:
    from pathlib import Path

    from packaging.tags import Tag

    from stacklock.runner import Runner

__all__ = [
    "Interpreter",
    "find_base_python",
    "interpreter_key",
    "probe_interpreter",
    "remember_interpreter",
]

_PROBE = marker_env_code(r"""
glibc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
print(json.dumps({"executable": sys.executable, "env": env, "glibc": glibc}))
""")



def _probe_entry(python: str, cache: Path) -> Path | None:
    """Where the probe's answer for this very binary is remembered: keyed by the
    interpreter (path, inode, size, mtime) and the kernel (``platform_release``),
    the only things it depends on; None if it cannot be stat'ed (the probe then
    reports the problem)."""
    key = interpreter_key(python)
    return cache / "interpreters" / f"{key}.json" if key is not None else None


def interpreter_key(python: str) -> str | None:
    """A hex key that changes whenever the probe's answer could: the binary
    (path, inode, size, mtime) and the kernel; None if it cannot be stat'ed."""
    try:
        real = os.path.realpath(python)
        st = os.stat(real)
    except OSError:
        return None
    uname = os.uname()
    parts = (_PROBE, real, st.st_ino, st.st_size, st.st_mtime_ns,
             uname.release, uname.version, uname.machine)
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()


def _run_probe(python: str, runner: Runner, cache: Path | None) -> dict[str, Any]:
    entry = _probe_entry(python, cache) if cache is not None else None
    if entry is not None:
        with contextlib.suppress(OSError, ValueError):
            data = parse_json(entry.read_bytes())
            if isinstance(data, dict) and isinstance(data.get("env"), dict):
                return data
    rc, out = runner.capture([python, "-c", _PROBE])
    try:
        data = parse_json(out)
    except ValueError:
        data = None
    if rc != 0 or not isinstance(data, dict):
        raise InstallError(
            f"{python}: cannot run it to ask its version (exit {rc})",
            hint="pass --python with a working CPython",
        )
    return data


def remember_interpreter(interp: Interpreter, cache: Path) -> None:
    """Keep the probe's answer, so the next install on this interpreter starts no
    second one (called once an install goes ahead: a dry run writes nothing)."""
    entry = _probe_entry(interp.path, cache)
    if entry is None or entry.is_file():
        return
    glibc = f"glibc {interp.glibc[0]}.{interp.glibc[1]}" if interp.glibc else None
    data = {"env": dict(interp.marker_env), "glibc": glibc}
    with contextlib.suppress(OSError):
        atomic_write_bytes(entry, json.dumps(data).encode("utf-8"), durable=False)


def probe_interpreter(
    python: str, *, runner: Runner, cache: Path | None = None
) -> Interpreter:
    """What ``python`` is (version, machine, glibc, markers, tags), from what
    :func:`remember_interpreter` kept under ``cache`` when it can."""
    data = _run_probe(python, runner, cache)
    env: dict[str, str] = data["env"]
    glibc = None
    text = data.get("glibc") or ""
    if text.startswith("glibc "):
        major, minor = text.split()[1].split(".")[:2]
        glibc = (int(major), int(minor))
    from stacklock.target import PLATFORMS, Target

    machine = env["platform_machine"]
    platform = f"linux_{machine}"
    tags: tuple[Tag, ...] = ()
    if platform in PLATFORMS and glibc is not None:
        target = Target(
            python=env["python_version"],  # "3.12": a pre-release is fine too
            platform=platform,
            manylinux=f"2_{glibc[1]}",
        )
        tags = tuple(target.tags())
    return Interpreter(
        path=python,
        version=env["python_full_version"],
        machine=machine,
        glibc=glibc,
        marker_env=env,
        tags=tags,
    )
