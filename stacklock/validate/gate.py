"""The throughput gate: serve the model from the venv, baseline then speculative,
stream requests at each concurrency, and pass or fail on the profile's thresholds.

The server runs as ``<venv python> -m sglang.launch_server`` in its own process
group, so stopping it (SIGINT, then SIGTERM, then SIGKILL) also ends its scheduler and
detokenizer children; the ``finally`` that stops it also runs on Ctrl-C. A server
that exits before it is healthy, is not healthy in time, or dies mid-run is a failed
gate with the tail of its log, never a hang.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import httpx

from stacklock.validate.checks import FAIL, PASS, SKIP, CheckResult
from stacklock.validate.client import LevelResult, read_accept_length, run_level
from stacklock.validate.probes import probe_env

if TYPE_CHECKING:
    from pathlib import Path

    from stacklock.validate.config import GateConfig

__all__ = ["GateResult", "PhaseResult", "ServerError", "SglangServer", "run_gate"]


class ServerError(Exception):
    """The server could not serve: ``reason`` is the one line for the report."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 1) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return " | ".join(text.splitlines()[-lines:])


class SglangServer:
    """``python -m sglang.launch_server`` in its own process group, logged to a file."""

    def __init__(self, python: Path, *, model: str, args: tuple[str, ...],
                 log_path: Path, port: int | None = None, poll: float = 1.0) -> None:
        self.python = python
        self.model = model
        self.args = args
        self.log_path = log_path
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.poll = poll
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        return [str(self.python), "-m", "sglang.launch_server", "--model-path",
                self.model, "--host", "127.0.0.1", "--port", str(self.port), *self.args]

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        try:
            self.proc = subprocess.Popen(self.argv, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=probe_env(),
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
                                  f"healthy: {_tail(self.log_path) or 'no output'}")
            try:
                if http.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            if time.monotonic() - start > timeout:
                raise ServerError(f"server not healthy after {timeout:.0f} s "
                                  f"(startup-timeout): {_tail(self.log_path)}")
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


@dataclass(frozen=True, kw_only=True)
class PhaseResult:
    name: str                           # "baseline" | "speculative"
    levels: tuple[LevelResult, ...] = ()
    accept_length: float | None = None
    startup_seconds: float | None = None
    error: str | None = None
    log: str | None = None

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "levels": [lv.to_dict() for lv in self.levels],
                "accept_length": self.accept_length,
                "startup_seconds": self.startup_seconds, "error": self.error,
                "log": self.log}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseResult:
        return cls(name=data["name"],
                   levels=tuple(LevelResult.from_dict(lv) for lv in data["levels"]),
                   accept_length=data.get("accept_length"),
                   startup_seconds=data.get("startup_seconds"),
                   error=data.get("error"), log=data.get("log"))


@dataclass(frozen=True, kw_only=True)
class GateResult:
    config: dict[str, Any]
    phases: tuple[PhaseResult, ...] = ()
    checks: tuple[CheckResult, ...] = field(default_factory=tuple)

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "phases": [p.to_dict() for p in self.phases],
                "checks": [c.to_dict() for c in self.checks]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateResult:
        return cls(config=dict(data["config"]),
                   phases=tuple(PhaseResult.from_dict(p) for p in data["phases"]),
                   checks=tuple(CheckResult.from_dict(c) for c in data["checks"]))


def _bench(http: httpx.Client, url: str, config: GateConfig, name: str,
           alive: SglangServer | None) -> tuple[list[LevelResult], str | None]:
    levels: list[LevelResult] = []
    for i, level in enumerate(config.concurrency):
        result = run_level(http, url, engine=config.engine, model=config.model,
                           concurrency=level, requests=level * config.rounds,
                           input_tokens=config.input_tokens,
                           output_tokens=config.output_tokens,
                           timeout=config.request_timeout, seed=i)
        levels.append(result)
        failed = result.completed < result.requests
        # failed requests and a dying server arrive together: give it a moment
        code = alive.exited(grace=5.0 if failed else 0.0) if alive else None
        if alive is not None and code is not None:
            return levels, (f"server exited with code {code} during concurrency "
                            f"{level} ({name}): {_tail(alive.log_path)}")
        if failed:
            return levels, (f"{result.requests - result.completed} of "
                            f"{result.requests} requests failed at concurrency "
                            f"{level}: {result.errors[0]}")
    return levels, None


def _run_phase(http: httpx.Client, config: GateConfig, name: str, *,
               python: Path | None, args: tuple[str, ...], url: str | None,
               log_dir: Path) -> PhaseResult:
    if config.engine == "openai":
        assert url is not None
        levels, error = _bench(http, url, config, name, None)
        return PhaseResult(name=name, levels=tuple(levels), error=error,
                           accept_length=_accept(levels, http, url))
    assert python is not None
    log = log_dir / f"server-{name}.log"
    server = SglangServer(python, model=config.model, args=args, log_path=log,
                          port=config.port)
    try:
        server.start()
        startup = server.wait_healthy(http, config.startup_timeout)
        levels, error = _bench(http, server.url, config, name, server)
        accept = _accept(levels, http, server.url) if error is None else None
        return PhaseResult(name=name, levels=tuple(levels), accept_length=accept,
                           startup_seconds=round(startup, 2), error=error, log=str(log))
    except ServerError as exc:
        return PhaseResult(name=name, error=str(exc), log=str(log))
    finally:
        server.stop(config.shutdown_timeout)


def _accept(levels: list[LevelResult], http: httpx.Client, url: str) -> float | None:
    measured = [lv.accept_length for lv in levels if lv.accept_length is not None]
    if measured:
        return measured[0]
    return read_accept_length(http, url)


def _verdicts(config: GateConfig, phases: list[PhaseResult]) -> list[CheckResult]:
    broken = [p for p in phases if p.error]
    if broken:
        return [CheckResult(name="gate", status=FAIL,
                            reason=f"{p.name}: {p.error}") for p in broken]
    under_test = phases[-1]
    low = min(config.concurrency)
    spec = under_test.level(low)
    out: list[CheckResult] = []
    tps = spec.tokens_per_second if spec else 0.0
    accept = (f", accept length {under_test.accept_length:.2f}"
              if under_test.accept_length else "")
    if config.min_tokens_per_second is None:
        out.append(CheckResult(name="gate-throughput", status=PASS,
                               reason=f"{under_test.name} {tps:.1f} tok/s at "
                               f"concurrency {low}{accept} (no threshold)"))
    else:
        ok = tps >= config.min_tokens_per_second
        out.append(CheckResult(
            name="gate-throughput", status=PASS if ok else FAIL,
            reason=f"{under_test.name} {tps:.1f} tok/s at concurrency {low} "
            f"{'>=' if ok else '<'} {config.min_tokens_per_second}{accept}"))
    base = phases[0].level(low) if len(phases) > 1 else None
    if base is None or not base.tokens_per_second:
        if config.min_speedup is not None:
            out.append(CheckResult(name="gate-speedup", status=SKIP,
                                   reason="no baseline to compare with"))
        return out
    speedup = tps / base.tokens_per_second
    ok = config.min_speedup is None or speedup >= config.min_speedup
    limit = f" (min {config.min_speedup})" if config.min_speedup is not None else ""
    out.append(CheckResult(
        name="gate-speedup", status=PASS if ok else FAIL,
        reason=f"{speedup:.3f}x: {tps:.1f} vs baseline {base.tokens_per_second:.1f} "
        f"tok/s at concurrency {low}{limit}"))
    return out


def run_gate(config: GateConfig, *, python: Path | None, log_dir: Path,
             http: httpx.Client | None = None) -> GateResult:
    """Baseline then speculative; each phase's server is stopped before the next."""
    own = http is None
    client = http or httpx.Client(limits=httpx.Limits(
        max_connections=max(config.concurrency) + 4))
    try:
        phases: list[PhaseResult] = []
        if config.engine == "openai":
            if config.baseline_url:
                phases.append(_run_phase(client, config, "baseline", python=None,
                                         args=(), url=config.baseline_url,
                                         log_dir=log_dir))
            name = "speculative" if config.baseline_url else "server"
            phases.append(_run_phase(client, config, name, python=None, args=(),
                                     url=config.url, log_dir=log_dir))
        else:
            plan = [("baseline", config.server_args)]
            if config.speculative_args:
                plan.append(("speculative",
                             (*config.server_args, *config.speculative_args)))
            for name, args in plan:
                phases.append(_run_phase(client, config, name, python=python,
                                         args=args, url=None, log_dir=log_dir))
                if phases[-1].error:
                    break
    finally:
        if own:
            client.close()
    return GateResult(config=config.to_dict(), phases=tuple(phases),
                      checks=tuple(_verdicts(config, phases)))
