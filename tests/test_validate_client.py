"""The gate's client against a loopback server with SGLang's routes and scripted
timing. Expected numbers come from the script: a request of N tokens with first-token
delay T and step S, k tokens a step, cannot finish before T + (ceil(N/k) - 1) * S, so
measured tok/s is at most N / that; lower bounds are generous (a loaded CI box)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import httpx
import pytest

from stacklock.validate.client import read_accept_length, run_level
from stacklock.validate.config import GateConfig
from stacklock.validate.gate import run_gate
from tests.data.validate.fake_sglang.sglang.launch_server import parse, serve

TTFT, STEP, TOKENS, ACCEPT = 0.05, 0.01, 20, 3


def _start(*extra: str) -> tuple[str, object]:
    args = parse(["--model-path", "test/model", "--port", "0",
                  "--fake-ttft", str(TTFT), "--fake-step", str(STEP), *extra])
    server = serve(args)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


@pytest.fixture
def servers() -> Iterator[tuple[str, str]]:
    base, b = _start()
    spec, s = _start("--speculative-algorithm", "EAGLE3",
                     "--fake-accept", str(ACCEPT))
    yield base, spec
    for server in (b, s):
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]


def _floor(accept: int) -> float:
    """Seconds one request needs at least."""
    return TTFT + (math.ceil(TOKENS / accept) - 1) * STEP


def test_sglang_generate_stream(servers: tuple[str, str]) -> None:
    base, spec = servers
    with httpx.Client() as http:
        plain = run_level(http, base, engine="sglang", model="", concurrency=1,
                          requests=2, input_tokens=64, output_tokens=TOKENS, timeout=30)
        fast = run_level(http, spec, engine="sglang", model="", concurrency=1,
                         requests=2, input_tokens=64, output_tokens=TOKENS, timeout=30)
        server_avg = read_accept_length(http, spec)
        assert read_accept_length(http, base) is None
    assert (plain.completed, plain.output_tokens, plain.errors) == (2, 2 * TOKENS, ())
    bound = TOKENS / _floor(1)
    assert 0.3 * bound <= plain.tokens_per_second <= bound * 1.001
    assert plain.ttft_ms["mean"] is not None and plain.ttft_ms["mean"] >= TTFT * 1000
    assert plain.itl_ms["mean"] is not None and plain.itl_ms["mean"] >= STEP * 1000
    assert plain.accept_length is None  # no spec_verify_ct without speculation
    verify_passes = math.ceil(TOKENS / ACCEPT)
    assert fast.accept_length == pytest.approx(TOKENS / verify_passes)
    assert server_avg == pytest.approx(TOKENS / verify_passes)
    fast_bound = TOKENS / _floor(ACCEPT)
    assert 0.3 * fast_bound <= fast.tokens_per_second <= fast_bound * 1.001


def test_concurrency_overlaps_requests(servers: tuple[str, str]) -> None:
    base, _ = servers
    with httpx.Client() as http:
        level = run_level(http, base, engine="sglang", model="", concurrency=4,
                          requests=8, input_tokens=16, output_tokens=TOKENS, timeout=30)
    bound = 4 * TOKENS / _floor(1)  # four streams at a time, each at the script's pace
    assert level.completed == 8
    assert level.tokens_per_second <= bound * 1.001
    assert level.tokens_per_second >= 0.3 * bound


def _gate(base: str, spec: str, **limits: float) -> GateConfig:
    return GateConfig(engine="openai", model="test/model", url=spec, baseline_url=base,
                      input_tokens=32, output_tokens=TOKENS, concurrency=(1, 2),
                      rounds=2, **limits)  # type: ignore[arg-type]


def test_openai_route_and_verdicts(servers: tuple[str, str], tmp_path) -> None:
    base, spec = servers
    bound = TOKENS / _floor(ACCEPT)
    passed = run_gate(_gate(base, spec, min_tokens_per_second=0.25 * bound,
                            min_speedup=1.0), python=None, log_dir=tmp_path)
    assert [p.name for p in passed.phases] == ["baseline", "speculative"]
    levels = passed.phases[1].levels
    assert [lv.concurrency for lv in levels] == [1, 2]
    assert all(lv.output_tokens == lv.requests * TOKENS for lv in levels)  # usage
    assert [(c.name, c.status) for c in passed.checks] == [
        ("gate-throughput", "pass"), ("gate-speedup", "pass")]
    server_avg = TOKENS / math.ceil(TOKENS / ACCEPT)
    assert passed.phases[1].accept_length == pytest.approx(server_avg)
    failed = run_gate(_gate(base, spec, min_tokens_per_second=2 * bound),
                      python=None, log_dir=tmp_path)
    verdict = failed.checks[0]
    assert verdict.status == "fail"
    assert verdict.reason.startswith("speculative ")
    assert f"< {2 * bound}" in verdict.reason


def test_dead_url_fails_the_gate(tmp_path) -> None:
    config = GateConfig(engine="openai", model="m", url="http://127.0.0.1:9",
                        output_tokens=4, concurrency=(1,), rounds=1)
    result = run_gate(config, python=None, log_dir=tmp_path)
    assert result.checks[0].status == "fail"
    assert "1 of 1 requests failed at concurrency 1: ConnectError" in \
        result.checks[0].reason
