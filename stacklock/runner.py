"""The seam between stacklock and the programs it starts.

Every subprocess (uv, an interpreter probe, the CUDA runfile, nvidia-smi, the
venv's own python during validation) goes through a :class:`Runner`, so tests use
the real one for what can run here (uv, python) and :class:`RecordingRunner` for
what cannot (a 4 GB runfile as root, nvidia-smi without a GPU). ``run`` sends
output to a log file the caller names (nothing is lost, nothing is printed);
``capture`` returns a short query's output, bounded and decoded the one way
uv's output is read (:mod:`stacklock.uvoutput`). Also here: where uv is, and a free
local port for a server stacklock starts.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from stacklock.uvbin import find_uv
from stacklock.uvoutput import capture

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "RecordedCall",
    "RecordingRunner",
    "Runner",
    "SubprocessRunner",
    "find_uv",
    "free_port",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket  # only the validate gate's server needs a port

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str | None] | None = None,
        cwd: Path | None = None,
    ) -> int:
        """Run ``argv`` with stdout+stderr appended to ``log``; return the exit code."""
        ...

    def capture(
        self, argv: Sequence[str], *, env: Mapping[str, str | None] | None = None,
        timeout: float = 60.0, stderr: bool = False,
    ) -> tuple[int, str]:
        """Run a short query (``uv python find``) and return (rc, stdout); a
        missing program or one past ``timeout`` is rc 127 with no output.
        ``stderr``: its stderr follows its stdout in the text (what it said when
        it failed)."""
        ...


def _merged_env(env: Mapping[str, str | None] | None) -> dict[str, str]:
    """``os.environ`` changed by ``env``: a value set, or None removed."""
    merged = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


class SubprocessRunner:
    """The real runner. A missing program is rc 127, like a shell says it."""

    def run(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str | None] | None = None,
        cwd: Path | None = None,
    ) -> int:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as fh:
            fh.write(("$ " + " ".join(argv) + "\n").encode("utf-8"))
            fh.flush()
            try:
                proc = subprocess.run(
                    list(argv),
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=_merged_env(env),
                    cwd=cwd,
                    check=False,
                )
            except FileNotFoundError as exc:
                fh.write(f"{exc}\n".encode())
                return 127
            fh.write(f"[exit {proc.returncode}]\n".encode())
        return proc.returncode

    def capture(
        self, argv: Sequence[str], *, env: Mapping[str, str | None] | None = None,
        timeout: float = 60.0, stderr: bool = False,
    ) -> tuple[int, str]:
        said = capture(argv, env=_merged_env(env), timeout=timeout)
        return said.rc, said.stdout + (said.stderr if stderr else "")


@dataclass(frozen=True, kw_only=True)
class RecordedCall:
    argv: tuple[str, ...]
    env: dict[str, str | None]
    cwd: Path | None


@dataclass(kw_only=True)
class RecordingRunner:
    """Records calls; ``handler`` (if any) acts them out and returns the rc.

    Used for commands that cannot run on a test machine (nvidia-smi), and as a
    wrapper that forwards to a real runner while keeping the record.
    """

    handler: Callable[[RecordedCall, Path | None], int] | None = None
    outputs: dict[str, tuple[int, str]] = field(default_factory=dict)
    calls: list[RecordedCall] = field(default_factory=list)

    def run(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str | None] | None = None,
        cwd: Path | None = None,
    ) -> int:
        call = RecordedCall(argv=tuple(argv), env=dict(env or {}), cwd=cwd)
        self.calls.append(call)
        return self.handler(call, log) if self.handler else 0

    def capture(
        self, argv: Sequence[str], *, env: Mapping[str, str | None] | None = None,
        timeout: float = 60.0, stderr: bool = False,
    ) -> tuple[int, str]:
        call = RecordedCall(argv=tuple(argv), env=dict(env or {}), cwd=None)
        self.calls.append(call)
        return self.outputs.get(Path(argv[0]).name, (127, ""))
