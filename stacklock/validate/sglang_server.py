"""The serving engine as a child process: ``<venv python> -m sglang.launch_server`` in
its own process group, logged to a file, with the environment the gate gives it.

Stopping it (SIGINT, then SIGTERM, then SIGKILL) ends the whole group, scheduler and
detokenizer children included. A server that exits before it is healthy, or is not
healthy in time, raises ``ServerError`` with the tail of its log, never a hang.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import IO, TYPE_CHECKING

import httpx

from stacklock.errors import ServerError
from stacklock.runner import free_port
from stacklock.validation import NO_MULTICAST

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from stacklock.validation import GateConfig

__all__ = ["SglangServer", "server_env", "tail"]


def server_env(config: GateConfig,
               base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the caller's, the multicast choice, then ``env``."""
    env = dict(os.environ if base is None else base)
    if config.multicast is False:
        env.update(NO_MULTICAST)
    elif config.multicast is True:
        for name in NO_MULTICAST:
            env.pop(name, None)
    env.update(config.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def tail(path: Path, lines: int = 1) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return " | ".join(text.splitlines()[-lines:])


class SglangServer:
    """``python -m sglang.launch_server`` in its own process group, logged to a file."""

    def __init__(self, python: Path, *, model: str, args: tuple[str, ...],
                 log_path: Path, port: int | None = None, poll: float = 1.0,
                 env: dict[str, str] | None = None) -> None:
        self.python = python
        self.env = env
        self.model = model
        self.args = args
        self.log_path = log_path
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.poll = poll
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def server_args(self) -> list[str]:
        return ["--model-path", self.model, "--host", "127.0.0.1",
                "--port", str(self.port), *self.args]

    @property
    def argv(self) -> list[str]:
        return [str(self.python), "-m", "sglang.launch_server", *self.server_args]

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        try:
            self.proc = subprocess.Popen(self.argv, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True)
        except OSError as exc:
            raise ServerError(f"cannot start {self.argv[0]}: {exc.strerror}") from exc

    def exited(self, grace: float = 0.0) -> int | None:
        """The exit code once the server has died (waiting up to ``grace`` s)."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=grace) if grace else self.proc.poll()
        except subprocess.TimeoutExpired:
            return None

    def wait_healthy(self, http: httpx.Client, timeout: float) -> float:
        """Seconds until ``GET /health`` answered 200."""
        start = time.monotonic()
        while True:
            code = self.exited()
            if code is not None:
                raise ServerError(f"server exited with code {code} before it was "
                                  f"healthy: {tail(self.log_path) or 'no output'}")
            try:
                if http.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            if time.monotonic() - start > timeout:
                raise ServerError(f"server not healthy after {timeout:.0f} s "
                                  f"(startup-timeout): {tail(self.log_path)}")
            time.sleep(self.poll)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL to the whole group; the exit code."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            for sig, share in ((signal.SIGINT, 0.5), (signal.SIGTERM, 0.4),
                               (signal.SIGKILL, 0.1)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=max(timeout * share, 1.0))
                    break
                except subprocess.TimeoutExpired:
                    continue
        if proc is not None:
            try:  # children the leader left behind
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return None if proc is None else proc.returncode
