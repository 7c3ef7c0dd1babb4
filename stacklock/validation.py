"""The ``[validate]`` table of a profile (copied into the lock as
``[tool.stacklock.validate]``): what to import, probe thresholds, the throughput gate.

Pure: a dict in, a frozen config out. Unknown keys are errors naming the key path, so a
typo in a reviewed file never silently switches a check off.

    [validate]
    imports = ["torch", "sgl_kernel", "flashinfer"]
    min-gpus = 8

    [validate.probes]
    sizes = ["4KB", "42KB", "4MB"]            # default: 4 KB .. 4 MB, 42 KB included
    max-allreduce-us = {"42KB" = 60.0}
    min-matmul-tflops = 600.0

    [validate.gate]
    engine = "sglang"                         # or "openai" with url = "http://..."
    model = "moonshotai/Kimi-K2.5"
    server-args = ["--tp", "8"]
    speculative-args = ["--speculative-algorithm", "EAGLE3", ...]
    concurrency = [1, 4, 16]
    warmup-requests = 1                       # per phase, not measured
    env = {SGLANG_ENABLE_SPEC_V2 = "1"}       # for the server process
    multicast = false                         # default: as the machine has it
    min-tokens-per-second = 92.0              # speculative, lowest concurrency
    min-speedup = 1.0                         # speculative over baseline, same
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stacklock.tablereader import TableReader

__all__ = [
    "DEFAULT_SIZES",
    "NO_MULTICAST",
    "GateConfig",
    "ProbeConfig",
    "ValidateConfig",
    "parse_size",
    "parse_validate_config",
]

# the environment that switches NVLink multicast off (every probe's; the gate's
# only when the profile says multicast = false)
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
KB = 1024
DEFAULT_SIZES = (4 * KB, 8 * KB, 16 * KB, 32 * KB, 42 * KB, 64 * KB, 128 * KB,
                 256 * KB, 512 * KB, 1024 * KB, 2048 * KB, 4096 * KB)


def parse_size(text: str | int) -> int:
    """``"42KB"`` -> 43008, ``"4MB"`` -> 4194304, ``4096`` -> 4096 (KB = 1024 bytes)."""
    if isinstance(text, int):
        return text
    raw = text.strip().upper().removesuffix("B")
    scale = {"K": KB, "M": KB * KB}.get(raw[-1:], 1)
    digits = raw[:-1] if scale != 1 else raw
    try:
        value = float(digits)
    except ValueError:
        raise ValueError(f"{text!r} is not a size like 42KB or 4MB") from None
    return int(value * scale)

_TOP = {"imports", "min-gpus", "probes", "gate"}
_PROBES = {"enabled", "sizes", "iters", "matmul-n", "max-allreduce-us",
           "min-matmul-tflops", "timeout"}
_GATE = {"engine", "model", "url", "baseline-url", "server-args", "speculative-args",
         "input-tokens", "output-tokens", "concurrency", "rounds",
         "min-tokens-per-second", "min-speedup", "startup-timeout", "request-timeout",
         "shutdown-timeout", "port", "warmup-requests", "env", "multicast"}
ENGINES = ("sglang", "openai")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL", re.IGNORECASE)


def shown_env(env: dict[str, str | None]) -> dict[str, str | None]:
    """``env`` as reports show it: values of secret-looking names are hidden."""
    return {k: "***" if v is not None and _SECRET.search(k) else v
            for k, v in env.items()}


@dataclass(frozen=True, kw_only=True)
class ProbeConfig:
    enabled: bool = True
    sizes: tuple[int, ...] = DEFAULT_SIZES
    iters: int = 100
    matmul_n: int = 8192
    max_allreduce_us: dict[int, float] = field(default_factory=dict)
    min_matmul_tflops: float | None = None
    timeout: float = 600.0


@dataclass(frozen=True, kw_only=True)
class GateConfig:
    engine: str = "sglang"
    model: str = ""
    url: str | None = None            # openai: the server under test
    baseline_url: str | None = None   # openai: a second server without speculation
    server_args: tuple[str, ...] = ()
    speculative_args: tuple[str, ...] = ()
    input_tokens: int = 1024
    output_tokens: int = 512
    concurrency: tuple[int, ...] = (1, 4, 16)
    rounds: int = 2                   # requests per level = concurrency * rounds
    min_tokens_per_second: float | None = None
    min_speedup: float | None = None
    startup_timeout: float = 1800.0
    request_timeout: float = 600.0
    shutdown_timeout: float = 60.0
    port: int | None = None
    warmup_requests: int = 1          # per phase, sent first, not measured
    env: dict[str, str] = field(default_factory=dict)  # the server's, on top
    multicast: bool | None = None     # None: NVLink multicast as the machine has it

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine, "model": self.model, "url": self.url,
            "baseline_url": self.baseline_url, "server_args": list(self.server_args),
            "speculative_args": list(self.speculative_args),
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "concurrency": list(self.concurrency), "rounds": self.rounds,
            "min_tokens_per_second": self.min_tokens_per_second,
            "min_speedup": self.min_speedup,
            "warmup_requests": self.warmup_requests,
            "env": shown_env(dict(self.env)),
            "multicast": self.multicast,
        }


@dataclass(frozen=True, kw_only=True)
class ValidateConfig:
    imports: tuple[str, ...] = ()
    min_gpus: int | None = None
    probes: ProbeConfig = field(default_factory=ProbeConfig)
    gate: GateConfig | None = None


def _size(r: TableReader, value: Any, key: str) -> int:
    """A message size: bytes as an integer, or text like "42KB"."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ValueError as exc:
            raise r.fail(key, str(exc), hint='write "42KB" or "4MB"') from None
    raise r.fail(key, f"expected a size like \"42KB\", got {value!r}")


def _parse_probes(raw: Any, r: TableReader) -> ProbeConfig:
    data = r.table(raw, "probes", _PROBES)
    sizes: tuple[int, ...] = DEFAULT_SIZES
    if "sizes" in data:
        listed = data["sizes"]
        if not isinstance(listed, list) or not listed:
            raise r.fail("probes.sizes", f"expected a list of sizes, got {listed!r}")
        sizes = tuple(_size(r, v, f"probes.sizes[{i}]") for i, v in enumerate(listed))
    limits: dict[int, float] = {}
    raw_limits = data.get("max-allreduce-us", {})
    if not isinstance(raw_limits, dict):
        raise r.fail("probes.max-allreduce-us",
                     f"expected a table of size = microseconds, got {raw_limits!r}")
    for text, limit in raw_limits.items():
        key = f"probes.max-allreduce-us.{text}"
        limits[_size(r, text, key)] = r.number(limit, key)
    missing = sorted(set(limits) - set(sizes))
    if missing:
        sizes = tuple(sorted({*sizes, *missing}))
    enabled = r.boolean(data.get("enabled", True), "probes.enabled")
    return ProbeConfig(
        enabled=enabled, sizes=sizes,
        iters=r.integer(data.get("iters", 100), "probes.iters"),
        matmul_n=r.integer(data.get("matmul-n", 8192), "probes.matmul-n"),
        max_allreduce_us=limits,
        min_matmul_tflops=(
            r.number(data["min-matmul-tflops"], "probes.min-matmul-tflops")
            if "min-matmul-tflops" in data else None),
        timeout=r.number(data.get("timeout", 600.0), "probes.timeout"),
    )


def _parse_env(data: dict[str, Any], r: TableReader) -> tuple[dict[str, str],
                                                               bool | None]:
    """``env`` (names and string values) and ``multicast``, which must not both
    set the multicast variables."""
    raw = data.get("env", {})
    if not isinstance(raw, dict):
        raise r.fail("gate.env", f"expected a table of NAME = \"value\", got {raw!r}",
                     hint='env = {SGLANG_ENABLE_SPEC_V2 = "1"}')
    env: dict[str, str] = {}
    for name, value in raw.items():
        if not _ENV_NAME.fullmatch(name):
            raise r.fail(f"gate.env.{name}", f"{name!r} is not an environment "
                         "variable name")
        if not isinstance(value, str):
            raise r.fail(f"gate.env.{name}", f"expected a string, got {value!r}",
                         hint=f'{name} = "{value}"')
        env[name] = value
    multicast = data.get("multicast")
    if multicast is not None:
        multicast = r.boolean(multicast, "gate.multicast")
    both = sorted(set(env) & set(NO_MULTICAST))
    if multicast is not None and both:
        raise r.fail(f"gate.env.{both[0]}", "multicast and env both set "
                     f"{both[0]}", hint="keep one of them")
    return env, multicast


def _warmups(r: TableReader, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise r.fail("gate.warmup-requests",
                     f"expected an integer >= 0, got {value!r}")
    return value


def _parse_gate(raw: Any, r: TableReader) -> GateConfig:
    data = r.table(raw, "gate", _GATE)
    engine = data.get("engine", "sglang")
    if engine not in ENGINES:
        raise r.fail("gate.engine", f"engine {engine!r} is not one of {ENGINES}")
    model = data.get("model", "")
    if not isinstance(model, str) or (engine == "sglang" and not model):
        raise r.fail("gate.model", f"expected a model path or name, got {model!r}",
                     hint='e.g. model = "moonshotai/Kimi-K2.5"')
    urls: dict[str, str | None] = {}
    for key in ("url", "baseline-url"):
        value = data.get(key)
        if value is not None and (not isinstance(value, str)
                                  or not value.startswith(("http://", "https://"))):
            raise r.fail(f"gate.{key}", f"expected an http(s) URL, got {value!r}")
        urls[key] = value.rstrip("/") if isinstance(value, str) else None
    if engine == "openai" and urls["url"] is None:
        raise r.fail("gate.url", "engine \"openai\" needs the server's url",
                     hint='url = "http://127.0.0.1:30000"')
    if engine == "sglang" and urls["url"] is not None:
        raise r.fail("gate.url", "engine \"sglang\" launches its own server",
                     hint='drop url, or use engine = "openai"')
    levels = data.get("concurrency", [1, 4, 16])
    if not isinstance(levels, list) or not levels:
        raise r.fail("gate.concurrency", f"expected a list of integers, got {levels!r}")
    concurrency = tuple(r.integer(v, f"gate.concurrency[{i}]")
                        for i, v in enumerate(levels))
    min_speedup = (r.number(data["min-speedup"], "gate.min-speedup")
                   if "min-speedup" in data else None)
    spec_args = r.strings(data.get("speculative-args", []), "gate.speculative-args")
    if min_speedup is not None and engine == "sglang" and not spec_args:
        raise r.fail("gate.min-speedup", "min-speedup needs speculative-args",
                     hint="the speedup is speculative over baseline")
    if min_speedup is not None and engine == "openai" and urls["baseline-url"] is None:
        raise r.fail("gate.min-speedup", "min-speedup needs baseline-url",
                     hint="the speedup is url over baseline-url")
    port = data.get("port")
    env, multicast = _parse_env(data, r)
    return GateConfig(
        engine=engine, model=model, url=urls["url"], baseline_url=urls["baseline-url"],
        server_args=r.strings(data.get("server-args", []), "gate.server-args"),
        speculative_args=spec_args,
        input_tokens=r.integer(data.get("input-tokens", 1024), "gate.input-tokens"),
        output_tokens=r.integer(data.get("output-tokens", 512), "gate.output-tokens"),
        concurrency=tuple(sorted(set(concurrency))),
        rounds=r.integer(data.get("rounds", 2), "gate.rounds"),
        min_tokens_per_second=(
            r.number(data["min-tokens-per-second"], "gate.min-tokens-per-second")
            if "min-tokens-per-second" in data else None),
        min_speedup=min_speedup,
        startup_timeout=r.number(data.get("startup-timeout", 1800.0),
                                 "gate.startup-timeout"),
        request_timeout=r.number(data.get("request-timeout", 600.0),
                                 "gate.request-timeout"),
        shutdown_timeout=r.number(data.get("shutdown-timeout", 60.0),
                                  "gate.shutdown-timeout"),
        port=r.integer(port, "gate.port") if port is not None else None,
        warmup_requests=_warmups(r, data.get("warmup-requests", 1)),
        env=env, multicast=multicast,
    )


def parse_validate_config(data: Any, *, path: str | None = None,
                          prefix: str = "validate") -> ValidateConfig:
    """``prefix`` is where the table sits: ``validate`` in a profile,
    ``tool.stacklock.validate`` in a lock; it starts every key path in errors."""
    r = TableReader(path, prefix)
    table = r.table(data if data is not None else {}, "", _TOP)
    imports = r.strings(table.get("imports", []), "imports")
    min_gpus = (r.integer(table["min-gpus"], "min-gpus")
                if "min-gpus" in table else None)
    probes = _parse_probes(table["probes"], r) if "probes" in table else ProbeConfig()
    gate = _parse_gate(table["gate"], r) if "gate" in table else None
    return ValidateConfig(imports=imports, min_gpus=min_gpus, probes=probes, gate=gate)
