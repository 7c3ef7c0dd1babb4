"""[validate] parsing: defaults, the real locks' tables, key-path errors."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from stacklock.errors import ProfileError
from stacklock.lock import load_lock
from stacklock.validation import (
    DEFAULT_SIZES,
    parse_size,
    parse_validate_config,
    shown_env,
)

H200 = Path(__file__).resolve().parents[1] / "data" / "validate" / "h200"
ROOT = Path(__file__).resolve().parents[2]

GATE = """
engine = "sglang"
model = "moonshotai/Kimi-K2.5"
server-args = ["--tp", "8", "--trust-remote-code", "--attention-backend", "flashinfer"]
speculative-args = ["--speculative-algorithm", "EAGLE3",
                    "--speculative-draft-model-path", "lightseekorg/kimi-k2.5-eagle3"]
input-tokens = 1024
output-tokens = 512
concurrency = [16, 1, 4]
min-tokens-per-second = 92.0
min-speedup = 1.0
warmup-requests = 4
env = {SGLANG_ENABLE_SPEC_V2 = "1"}
"""


def test_sizes_are_binary_kilobytes() -> None:
    assert parse_size("42KB") == 42 * 1024
    assert parse_size("4MB") == 4 * 1024 * 1024
    assert parse_size("4 kb") == 4096
    assert parse_size(512) == 512
    assert 42 * 1024 in DEFAULT_SIZES
    assert min(DEFAULT_SIZES) == 4096 and max(DEFAULT_SIZES) == 4 * 1024 * 1024
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_issue_gate_table_parses() -> None:
    config = parse_validate_config({"gate": tomllib.loads(GATE)})
    gate = config.gate
    assert gate is not None
    assert gate.engine == "sglang"
    assert gate.concurrency == (1, 4, 16)  # sorted: the threshold level comes first
    assert gate.speculative_args[:2] == ("--speculative-algorithm", "EAGLE3")
    assert (gate.min_tokens_per_second, gate.min_speedup) == (92.0, 1.0)
    assert gate.url is None
    assert gate.warmup_requests == 4
    assert gate.env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert gate.multicast is None  # as the machine has it


def test_gate_defaults_warm_up_once_and_leave_multicast_alone() -> None:
    gate = parse_validate_config({"gate": {"model": "m", "multicast": False,
                                           "warmup-requests": 0}}).gate
    assert gate is not None and (gate.warmup_requests, gate.multicast) == (0, False)
    plain = parse_validate_config({"gate": {"model": "m"}}).gate
    assert plain is not None
    assert (plain.warmup_requests, plain.env, plain.multicast) == (1, {}, None)


def test_reports_hide_secret_looking_env_values() -> None:
    assert shown_env({"HF_TOKEN": "hf_x", "OPENAI_API_KEY": "sk", "A": "1",
                      "NCCL_NVLS_ENABLE": None}) == {
        "HF_TOKEN": "***", "OPENAI_API_KEY": "***", "A": "1",
        "NCCL_NVLS_ENABLE": None}


def test_real_lock_tables() -> None:
    lock = load_lock(H200 / "pylock.h200-cu130.toml")
    config = parse_validate_config(lock.validate, path=lock.path,
                                   prefix="tool.stacklock.validate")
    assert config.imports == ("torch", "torchvision", "torchaudio",
                              "torch.distributed", "triton")
    assert config.min_gpus == 1
    assert config.probes.max_allreduce_us == {43008: 60.0, 4194304: 200.0}
    assert config.probes.min_matmul_tflops == 600.0
    assert config.gate is None
    shipped = load_lock(ROOT / "locks" / "pylock.pypi-cu130.toml")
    profile = tomllib.loads((ROOT / "profiles" / "pypi-cu130.toml").read_text())
    config = parse_validate_config(shipped.validate)
    assert config.imports == tuple(profile["validate"]["imports"])
    gate = config.gate
    assert gate is not None and gate.engine == "sglang"
    assert (gate.min_tokens_per_second, gate.min_speedup) == (
        profile["validate"]["gate"]["min-tokens-per-second"],
        profile["validate"]["gate"]["min-speedup"])


def test_threshold_size_missing_from_sizes_is_measured() -> None:
    config = parse_validate_config(
        {"probes": {"sizes": ["4KB"], "max-allreduce-us": {"42KB": 50}}})
    assert config.probes.sizes == (4096, 43008)


@pytest.mark.parametrize(("table", "key", "text"), [
    ({"imprts": []}, "tool.stacklock.validate.imprts", "unknown key 'imprts'"),
    ({"imports": ["torch", 3]}, "tool.stacklock.validate.imports[1]",
     "expected a string"),
    ({"gate": {"engine": "vllm", "model": "m"}}, "tool.stacklock.validate.gate.engine",
     "not one of"),
    ({"gate": {"model": "m", "concurrency": [1, 0]}},
     "tool.stacklock.validate.gate.concurrency[1]", "positive integer"),
    ({"gate": {"engine": "openai"}}, "tool.stacklock.validate.gate.url",
     "needs the server's url"),
    ({"gate": {"model": "m", "min-speedup": 1.0}},
     "tool.stacklock.validate.gate.min-speedup", "needs speculative-args"),
    ({"gate": {"model": "m", "min-tokens-per-second": "fast"}},
     "tool.stacklock.validate.gate.min-tokens-per-second", "expected a number"),
    ({"probes": {"max-allreduce-us": {"42 parsecs": 1.0}}},
     "tool.stacklock.validate.probes.max-allreduce-us.42 parsecs", "not a size"),
    ({"gate": {"model": "m", "tp": 8}}, "tool.stacklock.validate.gate.tp",
     "unknown key 'tp'"),
    ({"gate": {"model": "m", "warmup-requests": -1}},
     "tool.stacklock.validate.gate.warmup-requests", "an integer >= 0"),
    ({"gate": {"model": "m", "env": {"SGLANG_ENABLE_SPEC_V2": 1}}},
     "tool.stacklock.validate.gate.env.SGLANG_ENABLE_SPEC_V2", "expected a string"),
    ({"gate": {"model": "m", "env": {"BAD NAME": "1"}}},
     "tool.stacklock.validate.gate.env.BAD NAME", "not an environment variable"),
    ({"gate": {"model": "m", "env": ["A=1"]}}, "tool.stacklock.validate.gate.env",
     "expected a table"),
    ({"gate": {"model": "m", "multicast": "off"}},
     "tool.stacklock.validate.gate.multicast", "expected true or false"),
    ({"gate": {"model": "m", "multicast": True, "env": {"NCCL_NVLS_ENABLE": "0"}}},
     "tool.stacklock.validate.gate.env.NCCL_NVLS_ENABLE", "multicast and env both"),
])
def test_errors_name_file_and_key_path(table: dict, key: str, text: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_validate_config(table, path="locks/pylock.x.toml",
                              prefix="tool.stacklock.validate")
    assert info.value.key == key
    assert info.value.path == "locks/pylock.x.toml"
    assert text in str(info.value)
    assert str(info.value).startswith(f"locks/pylock.x.toml: {key}: ")


def test_openai_engine_needs_no_model_but_a_url() -> None:
    config = parse_validate_config({"gate": {
        "engine": "openai", "url": "http://127.0.0.1:30000/",
        "baseline-url": "http://127.0.0.1:30001", "min-speedup": 1.0}})
    assert config.gate is not None
    assert config.gate.url == "http://127.0.0.1:30000"
    assert config.gate.baseline_url == "http://127.0.0.1:30001"
