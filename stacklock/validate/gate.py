"""The throughput gate: serve the model from the venv, baseline then speculative,
stream requests at each concurrency, and pass or fail on the profile's thresholds
(with none, the numbers are reported as "measured").

Before anything is launched, the server arguments of every phase go through the
venv's own SGLang parser (``gate_preflight``): a misspelt flag fails in seconds. Each
phase sends ``warmup-requests`` requests first and measures only what follows. The
server's environment is the caller's, NVLink multicast included, plus the profile's
``env``; ``multicast = false`` switches multicast off for it, ``true`` drops the
variables that switch it off.

The server runs as ``<venv python> -m sglang.launch_server`` in its own process
group, so stopping it (SIGINT, then SIGTERM, then SIGKILL) also ends its scheduler and
detokenizer children; the ``finally`` that stops it also runs on Ctrl-C. A server
that exits before it is healthy, is not healthy in time, or dies mid-run is a failed
gate with the tail of its log, never a hang.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from stacklock.errors import ServerError
from stacklock.validate.checks import FAIL, MEASURED, PASS, SKIP, CheckResult
from stacklock.validate.gate_preflight import check_server_args
from stacklock.validate.serving_client import (
    LevelResult,
    read_accept_length,
    run_level,
    run_warmup,
)
from stacklock.validate.sglang_server import (
    SglangServer,
    server_env,
    tail,
)
from stacklock.validation import NO_MULTICAST, shown_env

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from stacklock.validation import GateConfig

__all__ = ["GateResult", "PhaseResult", "SglangServer", "run_gate",
           "server_env"]  # the last two re-exported from sglang_server


@dataclass(frozen=True, kw_only=True)
class PhaseResult:
    name: str                           # "baseline" | "speculative"
    levels: tuple[LevelResult, ...] = ()
    warmup_requests: int = 0            # sent first, not measured
    accept_length: float | None = None
    startup_seconds: float | None = None
    error: str | None = None
    log: str | None = None

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "levels": [lv.to_dict() for lv in self.levels],
                "warmup_requests": self.warmup_requests,
                "accept_length": self.accept_length,
                "startup_seconds": self.startup_seconds, "error": self.error,
                "log": self.log}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseResult:
        return cls(name=data["name"],
                   levels=tuple(LevelResult.from_dict(lv) for lv in data["levels"]),
                   warmup_requests=int(data.get("warmup_requests", 0)),
                   accept_length=data.get("accept_length"),
                   startup_seconds=data.get("startup_seconds"),
                   error=data.get("error"), log=data.get("log"))


@dataclass(frozen=True, kw_only=True)
class GateResult:
    config: dict[str, Any]
    phases: tuple[PhaseResult, ...] = ()
    checks: tuple[CheckResult, ...] = field(default_factory=tuple)
    # what the server saw of the multicast variables and the profile's env
    server_env: dict[str, str | None] = field(default_factory=dict)

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "phases": [p.to_dict() for p in self.phases],
                "checks": [c.to_dict() for c in self.checks],
                "server_env": dict(self.server_env)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateResult:
        return cls(config=dict(data["config"]),
                   phases=tuple(PhaseResult.from_dict(p) for p in data["phases"]),
                   checks=tuple(CheckResult.from_dict(c) for c in data["checks"]),
                   server_env=dict(data.get("server_env") or {}))


def _died(alive: SglangServer | None, grace: float, what: str) -> str | None:
    code = alive.exited(grace=grace) if alive is not None else None
    if alive is None or code is None:
        return None
    return f"server exited with code {code} during {what}: {tail(alive.log_path)}"


def _warmup(http: httpx.Client, url: str, config: GateConfig, name: str,
            alive: SglangServer | None) -> str | None:
    """The phase's warm-up requests; an error line when any failed."""
    if not config.warmup_requests:
        return None
    results = run_warmup(http, url, engine=config.engine, model=config.model,
                         requests=config.warmup_requests,
                         concurrency=max(config.concurrency),
                         input_tokens=config.input_tokens,
                         output_tokens=config.output_tokens,
                         timeout=config.request_timeout)
    failed = [r for r in results if not r.ok]
    if not failed:
        return None
    return _died(alive, 5.0, f"the warm-up ({name})") or (
        f"warm-up: {len(failed)} of {len(results)} requests failed: "
        f"{failed[0].error}")


def _bench(http: httpx.Client, url: str, config: GateConfig, name: str,
           alive: SglangServer | None) -> tuple[list[LevelResult], str | None]:
    error = _warmup(http, url, config, name, alive)
    if error is not None:
        return [], error
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
        died = _died(alive, 5.0 if failed else 0.0, f"concurrency {level} ({name})")
        if died:
            return levels, died
        if failed:
            return levels, (f"{result.requests - result.completed} of "
                            f"{result.requests} requests failed at concurrency "
                            f"{level}: {result.errors[0]}")
    return levels, None


def _run_phase(http: httpx.Client, config: GateConfig, name: str, *,
               server: SglangServer | None, url: str | None) -> PhaseResult:
    warm = config.warmup_requests
    if server is None:
        assert url is not None
        levels, error = _bench(http, url, config, name, None)
        return PhaseResult(name=name, levels=tuple(levels), error=error,
                           warmup_requests=warm,
                           accept_length=_accept(levels, http, url))
    log = str(server.log_path)
    try:
        server.start()
        startup = server.wait_healthy(http, config.startup_timeout)
        levels, error = _bench(http, server.url, config, name, server)
        accept = _accept(levels, http, server.url) if error is None else None
        return PhaseResult(name=name, levels=tuple(levels), accept_length=accept,
                           warmup_requests=warm, startup_seconds=round(startup, 2),
                           error=error, log=log)
    except ServerError as exc:
        return PhaseResult(name=name, error=str(exc), log=log)
    finally:
        server.stop(config.shutdown_timeout)


def _accept(levels: list[LevelResult], http: httpx.Client, url: str) -> float | None:
    measured = [lv.accept_length for lv in levels if lv.accept_length is not None]
    if measured:
        return measured[0]
    return read_accept_length(http, url)


def _describe(phase: PhaseResult, level: LevelResult | None) -> str:
    """tok/s, TTFT and both ITLs (medians) of one level, for a verdict's reason."""
    if level is None:
        return f"{phase.name}: nothing measured"

    def ms(stats: dict[str, float | None]) -> str:
        value = stats.get("median")
        return "-" if value is None else f"{value:.1f} ms"

    accept = (f", accept length {phase.accept_length:.2f}"
              if phase.accept_length else "")
    return (f"{phase.name} {level.tokens_per_second:.1f} tok/s at concurrency "
            f"{level.concurrency} (median TTFT {ms(level.ttft_ms)}, ITL "
            f"{ms(level.itl_chunk_ms)} per chunk, {ms(level.itl_token_ms)} per "
            f"token{accept})")


def _verdicts(config: GateConfig, phases: list[PhaseResult]) -> list[CheckResult]:
    broken = [p for p in phases if p.error]
    if broken:
        return [CheckResult(name="gate", status=FAIL,
                            reason=f"{p.name}: {p.error}") for p in broken]
    under_test = phases[-1]
    low = min(config.concurrency)
    spec = under_test.level(low)
    tps = spec.tokens_per_second if spec else 0.0
    said = _describe(under_test, spec)
    floor = config.min_tokens_per_second
    if floor is None:
        out = [CheckResult(name="gate-throughput", status=MEASURED,
                           reason=f"{said}; no min-tokens-per-second")]
    else:
        ok = tps >= floor
        out = [CheckResult(name="gate-throughput", status=PASS if ok else FAIL,
                           reason=f"{said} {'>=' if ok else '<'} {floor}")]
    base = phases[0].level(low) if len(phases) > 1 else None
    if base is None or not base.tokens_per_second:
        if config.min_speedup is not None:
            out.append(CheckResult(name="gate-speedup", status=SKIP,
                                   reason="no baseline to compare with"))
        return out
    speedup = tps / base.tokens_per_second
    reason = (f"{speedup:.3f}x: {tps:.1f} vs baseline {base.tokens_per_second:.1f} "
              f"tok/s at concurrency {low}")
    if config.min_speedup is None:
        out.append(CheckResult(name="gate-speedup", status=MEASURED,
                               reason=f"{reason}; no min-speedup"))
    else:
        ok = speedup >= config.min_speedup
        out.append(CheckResult(name="gate-speedup", status=PASS if ok else FAIL,
                               reason=f"{reason} (min {config.min_speedup})"))
    return out


def _sglang_phases(client: httpx.Client, config: GateConfig, python: Path,
                   log_dir: Path, env: dict[str, str],
                   checks: list[CheckResult]) -> list[PhaseResult]:
    plan = {"baseline": config.server_args}
    if config.speculative_args:
        plan["speculative"] = (*config.server_args, *config.speculative_args)
    servers = {name: SglangServer(python, model=config.model, args=args,
                                  log_path=log_dir / f"server-{name}.log",
                                  port=config.port, env=env)
               for name, args in plan.items()}
    preflight = check_server_args(
        python, {n: s.server_args for n, s in servers.items()}, env=env)
    checks.append(preflight)
    if preflight.status == FAIL:
        return []
    phases: list[PhaseResult] = []
    for name, server in servers.items():
        phases.append(_run_phase(client, config, name, server=server, url=None))
        if phases[-1].error:
            break
    return phases


def run_gate(config: GateConfig, *, python: Path | None, log_dir: Path,
             http: httpx.Client | None = None,
             base_env: Mapping[str, str] | None = None) -> GateResult:
    """Preflight, then baseline then speculative; each phase's server is stopped
    before the next. ``base_env``: the environment the server starts from
    (default: this process's), e.g. a bisect step's own caches."""
    env = server_env(config, base_env)
    seen = shown_env({name: env.get(name) for name in (*NO_MULTICAST, *config.env)})
    own = http is None
    client = http or httpx.Client(limits=httpx.Limits(
        max_connections=max(config.concurrency) + 4))
    checks: list[CheckResult] = []
    try:
        phases: list[PhaseResult] = []
        if config.engine == "openai":
            if config.baseline_url:
                phases.append(_run_phase(client, config, "baseline", server=None,
                                         url=config.baseline_url))
            name = "speculative" if config.baseline_url else "server"
            phases.append(_run_phase(client, config, name, server=None,
                                     url=config.url))
        else:
            assert python is not None
            phases = _sglang_phases(client, config, python, log_dir, env, checks)
    finally:
        if own:
            client.close()
    if phases:
        checks.extend(_verdicts(config, phases))
    return GateResult(config=config.to_dict(), phases=tuple(phases),
                      checks=tuple(checks), server_env=seen)
