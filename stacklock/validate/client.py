"""The gate's streaming benchmark client, for SGLang's native API and OpenAI routes.

Routes and JSON shapes follow SGLang's own server (``http_server.py``) and its
``bench_serving.py``:

- ``POST /generate`` with ``input_ids`` and ``sampling_params`` (``max_new_tokens``,
  ``ignore_eos``), ``stream: true``: server-sent events ``data: {json}`` whose
  ``text`` is cumulative and whose ``meta_info`` carries ``completion_tokens`` (and
  ``spec_verify_ct`` when speculation is on), ended by ``data: [DONE]``; an error in
  the stream is ``data: {"error": {"message": ...}}``.
- ``POST /v1/completions`` with a token-id ``prompt``: ``choices[0].text`` deltas and,
  with ``stream_options.include_usage``, a last chunk carrying ``usage``.
- ``GET /get_server_info`` (newer servers: ``/server_info``):
  ``internal_states[0].avg_spec_accept_length``.

Prompts are token ids, so no tokenizer is needed and the input length is exact.
Output tok/s for a level = all output tokens / wall time of the level (bench_serving's
"output throughput"); TTFT and inter-token latency are per request.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = [
    "LevelResult",
    "RequestResult",
    "make_input_ids",
    "read_accept_length",
    "run_level",
    "stream_request",
]

Clock = Callable[[], float]


@dataclass(frozen=True, kw_only=True)
class RequestResult:
    ok: bool
    error: str | None = None
    ttft: float = 0.0                  # seconds to the first output token
    latency: float = 0.0               # seconds to the last event
    output_tokens: int = 0
    itl: tuple[float, ...] = ()        # seconds between tokens (per token)
    spec_verify_ct: int | None = None  # SGLang: verify passes for this request


def _ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None}
    return {"mean": round(statistics.fmean(values) * 1000, 3),
            "median": round(statistics.median(values) * 1000, 3)}


@dataclass(frozen=True, kw_only=True)
class LevelResult:
    concurrency: int
    requests: int
    completed: int
    duration: float
    output_tokens: int
    tokens_per_second: float           # all output tokens / wall time
    ttft_ms: dict[str, float | None] = field(default_factory=dict)
    itl_ms: dict[str, float | None] = field(default_factory=dict)
    accept_length: float | None = None  # completion tokens / verify passes
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency, "requests": self.requests,
            "completed": self.completed, "duration_s": round(self.duration, 4),
            "output_tokens": self.output_tokens,
            "tokens_per_second": round(self.tokens_per_second, 3),
            "ttft_ms": self.ttft_ms, "itl_ms": self.itl_ms,
            "accept_length": None if self.accept_length is None
            else round(self.accept_length, 4),
            "errors": list(self.errors),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LevelResult:
        return cls(concurrency=int(data["concurrency"]), requests=int(data["requests"]),
                   completed=int(data["completed"]), duration=float(data["duration_s"]),
                   output_tokens=int(data["output_tokens"]),
                   tokens_per_second=float(data["tokens_per_second"]),
                   ttft_ms=dict(data.get("ttft_ms", {})),
                   itl_ms=dict(data.get("itl_ms", {})),
                   accept_length=data.get("accept_length"),
                   errors=tuple(data.get("errors", [])))


def make_input_ids(n: int, seed: int) -> list[int]:
    """Deterministic token ids away from the special tokens at the ends of a vocab."""
    rng = random.Random(seed)
    return [rng.randrange(1000, 20000) for _ in range(n)]


def _events(response: httpx.Response):  # type: ignore[no-untyped-def]
    for line in response.iter_lines():
        line = line.strip()
        if not line.startswith("data:"):
            continue
        body = line[len("data:"):].strip()
        if body == "[DONE]":
            return
        yield json.loads(body)


def stream_request(http: httpx.Client, base_url: str, *, engine: str, model: str,
                   input_ids: list[int], output_tokens: int, timeout: float,
                   clock: Clock = time.perf_counter) -> RequestResult:
    """One streamed request; never raises for server or network trouble."""
    if engine == "sglang":
        url = f"{base_url}/generate"
        payload: dict[str, Any] = {
            "input_ids": input_ids, "stream": True,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": output_tokens,
                                "ignore_eos": True},
        }
    else:
        url = f"{base_url}/v1/completions"
        payload = {"model": model, "prompt": input_ids, "max_tokens": output_tokens,
                   "temperature": 0.0, "stream": True, "ignore_eos": True,
                   "stream_options": {"include_usage": True}}
    start = clock()
    first: float | None = None
    last = start
    tokens = 0
    itl: list[float] = []
    verify: int | None = None
    try:
        with http.stream("POST", url, json=payload, timeout=timeout) as response:
            if response.status_code != 200:
                response.read()
                return RequestResult(ok=False, error=f"HTTP {response.status_code} "
                                     f"from {url}: {response.text[:200]}")
            for event in _events(response):
                if "error" in event:
                    err = event["error"]
                    msg = err.get("message") if isinstance(err, dict) else err
                    return RequestResult(ok=False, error=f"server error: {msg}")
                now = clock()
                if engine == "sglang":
                    meta = event.get("meta_info", {})
                    count = int(meta.get("completion_tokens", tokens))
                    if meta.get("spec_verify_ct") is not None:
                        verify = int(meta["spec_verify_ct"])
                else:
                    usage = event.get("usage") or {}
                    choices = event.get("choices") or [{}]
                    count = tokens + (1 if choices[0].get("text") else 0)
                    if usage.get("completion_tokens") is not None:
                        count = int(usage["completion_tokens"])
                new = count - tokens
                if new <= 0:
                    continue
                if first is None:
                    first = now
                else:
                    itl.extend([(now - last) / new] * new)
                last = now
                tokens = count
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        return RequestResult(ok=False, error=f"{type(exc).__name__} from {url}: {exc}")
    if first is None:
        return RequestResult(ok=False, error=f"{url} streamed no output token")
    return RequestResult(ok=True, ttft=first - start, latency=last - start,
                         output_tokens=tokens, itl=tuple(itl), spec_verify_ct=verify)


def run_level(http: httpx.Client, base_url: str, *, engine: str, model: str,
              concurrency: int, requests: int, input_tokens: int, output_tokens: int,
              timeout: float, seed: int = 0,
              clock: Clock = time.perf_counter) -> LevelResult:
    """``requests`` streamed requests, ``concurrency`` in flight at a time."""
    prompts = [make_input_ids(input_tokens, seed * 100_003 + i)
               for i in range(requests)]

    def one(ids: list[int]) -> RequestResult:
        return stream_request(http, base_url, engine=engine, model=model,
                              input_ids=ids, output_tokens=output_tokens,
                              timeout=timeout, clock=clock)

    pool = ThreadPoolExecutor(max_workers=concurrency,
                              thread_name_prefix=f"gate-c{concurrency}")
    start = clock()
    try:
        results = list(pool.map(one, prompts))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    duration = clock() - start
    good = [r for r in results if r.ok]
    tokens = sum(r.output_tokens for r in good)
    verify = [r for r in good if r.spec_verify_ct]
    accept = (sum(r.output_tokens for r in verify)
              / sum(r.spec_verify_ct or 0 for r in verify)) if verify else None
    errors = sorted({r.error or "" for r in results if not r.ok})
    return LevelResult(
        concurrency=concurrency, requests=requests, completed=len(good),
        duration=duration, output_tokens=tokens,
        tokens_per_second=tokens / duration if duration > 0 else 0.0,
        ttft_ms=_ms([r.ttft for r in good]),
        itl_ms=_ms([x for r in good for x in r.itl]),
        accept_length=accept, errors=tuple(errors),
    )


def read_accept_length(http: httpx.Client, base_url: str) -> float | None:
    """The server's own running average, for servers that omit ``spec_verify_ct``."""
    for route in ("/get_server_info", "/server_info"):
        try:
            response = http.get(f"{base_url}{route}", timeout=30)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            continue
        try:
            states = response.json().get("internal_states") or [{}]
        except (json.JSONDecodeError, AttributeError):
            return None
        value = states[0].get("avg_spec_accept_length") if states else None
        return float(value) if value is not None else None
    return None
