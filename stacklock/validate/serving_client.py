"""The gate's serving client: streamed requests to SGLang's native API or to an
OpenAI-compatible server (SGLang or vLLM), timed per request.

Routes and JSON shapes follow SGLang's ``http_server.py`` and ``bench_serving.py`` and
the OpenAI completions stream that SGLang and vLLM both serve:

- ``POST /generate`` with ``input_ids`` and ``sampling_params`` (``max_new_tokens``,
  ``ignore_eos``), ``stream: true``: ``data: {json}`` events whose
  ``meta_info.completion_tokens`` is the running token count (``spec_verify_ct`` too
  when speculation is on), ended by ``data: [DONE]``; an error in the stream is
  ``data: {"error": {"message": ...}}``.
- ``POST /v1/completions`` with a token-id ``prompt`` and ``stream_options``
  ``include_usage`` (a last chunk with ``usage`` and no choices) and
  ``continuous_usage_stats`` (``usage`` on every chunk, where the server honours it).
- ``GET /get_server_info`` (newer servers: ``/server_info``):
  ``internal_states[0].avg_spec_accept_length``.

What is measured, per request (the clock is injected; ``time.perf_counter`` by
default):

- **TTFT**: request sent to the first chunk that carries output text.
- **ITL per chunk**: the gap between successive chunks that carry output; a
  speculative engine sends several tokens a chunk, so this is what a reader sees.
- **ITL per token**: each chunk gap divided by the tokens that chunk brought, one
  sample per token (SGLang's bench_serving does the same); the mean over a request is
  (last output chunk - first) / the tokens after the first chunk. Token counts are the
  server's (``meta_info`` or ``usage``); where a stream reports only the total (an
  OpenAI stream without continuous usage), the first chunk is taken to hold 1 token,
  the one a prefill yields, and the rest are spread evenly over the later chunks.

A chunk without output text (the usage-only chunk) gives the token count and no
latency sample. Output tok/s of a level = all output tokens / wall time of the level
(bench_serving's "output throughput"). Prompts are token ids, so no tokenizer is
needed and the input length is exact.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from stacklock.bounded import Malformed, parse_json

__all__ = [
    "LevelResult",
    "RequestResult",
    "make_input_ids",
    "read_accept_length",
    "run_level",
    "run_warmup",
    "stream_request",
]

Clock = Callable[[], float]


@dataclass(frozen=True, kw_only=True)
class RequestResult:
    ok: bool
    error: str | None = None
    ttft: float = 0.0                    # seconds to the first output chunk
    latency: float = 0.0                 # seconds to the last output chunk
    output_tokens: int = 0               # the server's count
    chunk_gaps: tuple[float, ...] = ()   # seconds between successive output chunks
    first_chunk_tokens: int | None = None  # None: the server did not say
    chunk_tokens: tuple[int, ...] | None = None  # per later chunk; None: not said
    spec_verify_ct: int | None = None    # SGLang: verify passes for this request

    @property
    def itl_per_token(self) -> float | None:
        """Seconds per token after the first chunk (bench_serving's TPOT)."""
        after = self.output_tokens - (self.first_chunk_tokens or 1)
        return (self.latency - self.ttft) / after if after > 0 else None

    def token_gaps(self) -> list[float]:
        """One sample per token after the first chunk: its chunk's gap / its tokens."""
        if self.chunk_tokens is not None:
            return [gap / k for gap, k in zip(self.chunk_gaps, self.chunk_tokens,
                                              strict=True) for _ in range(k)]
        after = self.output_tokens - 1
        if not self.chunk_gaps or after <= 0:
            return []
        share = after / len(self.chunk_gaps)  # tokens per later chunk, on average
        return [gap / share for gap in self.chunk_gaps]


def _stats_ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "p99": None}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"mean": round(statistics.fmean(values) * 1000, 3),
            "median": round(statistics.median(values) * 1000, 3),
            "p99": round(p99 * 1000, 3)}


@dataclass(frozen=True, kw_only=True)
class LevelResult:
    concurrency: int
    requests: int
    completed: int
    duration: float
    output_tokens: int
    tokens_per_second: float           # all output tokens / wall time
    ttft_ms: dict[str, float | None] = field(default_factory=dict)
    itl_chunk_ms: dict[str, float | None] = field(default_factory=dict)
    itl_token_ms: dict[str, float | None] = field(default_factory=dict)
    tokens_per_chunk: float | None = None
    accept_length: float | None = None  # completion tokens / verify passes
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency, "requests": self.requests,
            "completed": self.completed, "duration_s": round(self.duration, 4),
            "output_tokens": self.output_tokens,
            "tokens_per_second": round(self.tokens_per_second, 3),
            "ttft_ms": self.ttft_ms, "itl_chunk_ms": self.itl_chunk_ms,
            "itl_token_ms": self.itl_token_ms,
            "tokens_per_chunk": None if self.tokens_per_chunk is None
            else round(self.tokens_per_chunk, 3),
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
                   itl_chunk_ms=dict(data.get("itl_chunk_ms", {})),
                   itl_token_ms=dict(data.get("itl_token_ms", {})),
                   tokens_per_chunk=data.get("tokens_per_chunk"),
                   accept_length=data.get("accept_length"),
                   errors=tuple(data.get("errors", [])))


def make_input_ids(n: int, seed: int) -> list[int]:
    """Deterministic token ids away from the special tokens at the ends of a vocab."""
    rng = random.Random(seed)
    return [rng.randrange(1000, 20000) for _ in range(n)]


def _events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        line = line.strip()
        if not line.startswith("data:"):
            continue
        body = line[len("data:"):].strip()
        if body == "[DONE]":
            return
        event = parse_json(body)
        if isinstance(event, dict):
            yield event


def _request(engine: str, base_url: str, model: str, input_ids: list[int],
             output_tokens: int) -> tuple[str, dict[str, Any]]:
    if engine == "sglang":
        return f"{base_url}/generate", {
            "input_ids": input_ids, "stream": True,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": output_tokens,
                                "ignore_eos": True},
        }
    return f"{base_url}/v1/completions", {
        "model": model, "prompt": input_ids, "max_tokens": output_tokens,
        "temperature": 0.0, "stream": True, "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }


def _read_event(engine: str, event: dict[str, Any]) -> tuple[bool, bool, int | None,
                                                             int | None]:
    """(has output text, may carry output, running token count, verify passes)."""
    if engine == "sglang":
        meta = event.get("meta_info") or {}
        count, verify = meta.get("completion_tokens"), meta.get("spec_verify_ct")
        return (count is None and bool(event.get("text")), True,
                None if count is None else int(count),
                None if verify is None else int(verify))
    choices = event.get("choices") or []
    text = choices[0].get("text") if choices and isinstance(choices[0], dict) else None
    count = (event.get("usage") or {}).get("completion_tokens")
    return bool(text), bool(choices), None if count is None else int(count), None


def stream_request(http: httpx.Client, base_url: str, *, engine: str, model: str,
                   input_ids: list[int], output_tokens: int, timeout: float,
                   clock: Clock = time.perf_counter) -> RequestResult:
    """One streamed request; never raises for server or network trouble."""
    url, payload = _request(engine, base_url, model, input_ids, output_tokens)
    start = clock()
    stamps: list[float] = []          # one per chunk that carries output
    counts: list[int | None] = []     # the running token count at each, if said
    count = 0                         # the server's running token count
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
                has_text, may_output, running, passes = _read_event(engine, event)
                if passes is not None:
                    verify = passes
                grew = running is not None and running > count
                if has_text or (may_output and grew):  # usage-only: a count, no time
                    stamps.append(now)
                    counts.append(running)
                if running is not None:
                    count = max(count, running)
    except (httpx.HTTPError, Malformed) as exc:
        return RequestResult(ok=False, error=f"{type(exc).__name__} from {url}: {exc}")
    if not stamps:
        return RequestResult(ok=False, error=f"{url} streamed no output token")
    known = [c for c in counts if c is not None]
    each = (tuple(b - a for a, b in itertools.pairwise(known))
            if len(known) == len(counts) else None)
    return RequestResult(
        ok=True, ttft=stamps[0] - start, latency=stamps[-1] - start,
        output_tokens=count or len(stamps),
        chunk_gaps=tuple(b - a for a, b in itertools.pairwise(stamps)),
        first_chunk_tokens=counts[0], chunk_tokens=each, spec_verify_ct=verify)


def _run(http: httpx.Client, base_url: str, *, engine: str, model: str,
         concurrency: int, prompts: list[list[int]], output_tokens: int,
         timeout: float, clock: Clock) -> tuple[list[RequestResult], float]:
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
    return results, clock() - start


def run_warmup(http: httpx.Client, base_url: str, *, engine: str, model: str,
               requests: int, concurrency: int, input_tokens: int,
               output_tokens: int, timeout: float) -> list[RequestResult]:
    """Requests of the measured shape whose numbers are thrown away: the first ones
    pay JIT compilation and cold caches (bench_serving sends one too)."""
    prompts = [make_input_ids(input_tokens, 7_000_003 + i) for i in range(requests)]
    results, _ = _run(http, base_url, engine=engine, model=model,
                      concurrency=max(1, min(concurrency, requests)),
                      prompts=prompts, output_tokens=output_tokens, timeout=timeout,
                      clock=time.perf_counter)
    return results


def run_level(http: httpx.Client, base_url: str, *, engine: str, model: str,
              concurrency: int, requests: int, input_tokens: int, output_tokens: int,
              timeout: float, seed: int = 0,
              clock: Clock = time.perf_counter) -> LevelResult:
    """``requests`` streamed requests, ``concurrency`` in flight at a time."""
    prompts = [make_input_ids(input_tokens, seed * 100_003 + i)
               for i in range(requests)]
    results, duration = _run(http, base_url, engine=engine, model=model,
                             concurrency=concurrency, prompts=prompts,
                             output_tokens=output_tokens, timeout=timeout, clock=clock)
    good = [r for r in results if r.ok]
    tokens = sum(r.output_tokens for r in good)
    chunks = sum(len(r.chunk_gaps) + 1 for r in good)
    verify = [r for r in good if r.spec_verify_ct]
    accept = (sum(r.output_tokens for r in verify)
              / sum(r.spec_verify_ct or 0 for r in verify)) if verify else None
    return LevelResult(
        concurrency=concurrency, requests=requests, completed=len(good),
        duration=duration, output_tokens=tokens,
        tokens_per_second=tokens / duration if duration > 0 else 0.0,
        ttft_ms=_stats_ms([r.ttft for r in good]),
        itl_chunk_ms=_stats_ms([g for r in good for g in r.chunk_gaps]),
        itl_token_ms=_stats_ms([g for r in good for g in r.token_gaps()]),
        tokens_per_chunk=tokens / chunks if chunks else None,
        accept_length=accept,
        errors=tuple(sorted({r.error or "" for r in results if not r.ok})),
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
            states = parse_json(response.content).get("internal_states") or [{}]
        except (Malformed, AttributeError):
            return None
        value = states[0].get("avg_spec_accept_length") if states else None
        return float(value) if value is not None else None
    return None
