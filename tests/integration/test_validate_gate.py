"""The gate's server lifecycle, for real: ``<venv python> -m sglang.launch_server``
in a venv made by uv, where sglang is the loopback stand-in from tests/data (its
flags come from its own ``sglang.srt.server_args``, which the preflight reads)."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stacklock.validate.gate import run_gate, server_env
from stacklock.validate.gate_preflight import check_server_args
from stacklock.validation import NO_MULTICAST, GateConfig
from tests.helpers.wheelkit import make_venv

FAKE = Path(__file__).resolve().parents[1] / "data" / "validate" / "fake_sglang"
ROOT = Path(__file__).resolve().parents[2]
TOKENS, ACCEPT = 12, 3


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = make_venv(tmp_path_factory.mktemp("gate") / "venv")
    site = next((exe.parent.parent / "lib").glob("python3*/site-packages"))
    (site / "fake_sglang.pth").write_text(str(FAKE) + "\n")
    return exe


def _config(*server_args: str, spec: bool = True, **kw: object) -> GateConfig:
    values: dict = {
        "engine": "sglang", "model": "test/model",
        "server_args": ("--fake-ttft", "0.02", "--fake-step", "0.02", *server_args),
        "speculative_args": ("--speculative-algorithm", "EAGLE3",
                             "--fake-accept", str(ACCEPT)) if spec else (),
        "input_tokens": 16, "output_tokens": TOKENS, "concurrency": (1, 2),
        "rounds": 2, "startup_timeout": 60.0, "shutdown_timeout": 10.0,
    }
    values.update(kw)
    return GateConfig(**values)


def _pids(log: Path) -> list[int]:
    return [int(p) for p in re.findall(r"pid=(\d+)", log.read_text())]


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting for a parent that is gone too
    (in a container nobody may reap the orphaned scheduler)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _all_gone(pids: list[int]) -> bool:
    """SIGKILL is delivered asynchronously: wait (a bound, not a timing) for the group
    to die."""
    deadline = time.monotonic() + 60
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return all(_gone(pid) for pid in pids)


def test_baseline_then_speculative(python: Path, tmp_path: Path) -> None:
    result = run_gate(_config(min_speedup=1.0), python=python, log_dir=tmp_path)
    assert [p.name for p in result.phases] == ["baseline", "speculative"]
    assert all(p.error is None and p.startup_seconds is not None
               for p in result.phases)
    spec = result.phases[1]
    assert spec.accept_length == pytest.approx(TOKENS / math.ceil(TOKENS / ACCEPT))
    assert result.phases[0].accept_length is None
    assert [(c.name, c.status) for c in result.checks] == [
        ("gate-preflight", "pass"), ("gate-throughput", "measured"),
        ("gate-speedup", "pass")]
    assert all(p.warmup_requests == 1 for p in result.phases)
    assert "speculative=None" in (tmp_path / "server-baseline.log").read_text()
    log = tmp_path / "server-speculative.log"
    assert "speculative=EAGLE3" in log.read_text()
    pids = _pids(log)
    assert len(pids) == 2  # the server and its "scheduler" child
    assert _all_gone(pids)  # the whole process group was stopped


def test_misspelt_flag_fails_before_launch(python: Path, tmp_path: Path) -> None:
    result = run_gate(_config("--tp-szie", "8"), python=python, log_dir=tmp_path)
    assert result.phases == ()
    (check,) = result.checks
    assert (check.name, check.status) == ("gate-preflight", "fail")
    assert check.reason == ("sglang 0.5.9 rejects the server arguments (baseline: "
                            "unrecognized arguments: --tp-szie 8; speculative: "
                            "unrecognized arguments: --tp-szie 8)")
    assert not list(tmp_path.glob("server-*.log"))  # nothing was launched
    bad_choice = run_gate(_config(spec=False, speculative_args=(
        "--speculative-algorithm", "EAGLE9")), python=python, log_dir=tmp_path)
    assert "argument --speculative-algorithm: invalid choice: 'EAGLE9'" in \
        bad_choice.checks[0].reason


def test_server_environment(python: Path, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile's env reaches the server; multicast stays as the machine has it
    (here: switched off, as on a shared host) unless the profile says otherwise."""
    for name, value in NO_MULTICAST.items():
        monkeypatch.setenv(name, value)
    config = _config(spec=False, concurrency=(1,), env={
        "SGLANG_ENABLE_SPEC_V2": "1", "SGLANG_HF_TOKEN": "hf_secret"})
    result = run_gate(config, python=python, log_dir=tmp_path)
    assert result.phases[0].error is None
    log = (tmp_path / "server-baseline.log").read_text()
    assert "SGLANG_ENABLE_SPEC_V2=1" in log and "NCCL_NVLS_ENABLE=0" in log
    assert "SGLANG_HF_TOKEN=hf_secret" in log  # the server gets it; reports do not
    assert result.server_env == {**NO_MULTICAST, "SGLANG_ENABLE_SPEC_V2": "1",
                                 "SGLANG_HF_TOKEN": "***"}
    assert result.config["env"]["SGLANG_HF_TOKEN"] == "***"


def test_server_env_multicast_choices() -> None:
    machine = {"PATH": "/bin", "NCCL_NVLS_ENABLE": "1"}
    same = server_env(_config(), machine)
    assert same["NCCL_NVLS_ENABLE"] == "1" and "NVSHMEM_DISABLE_NVLS" not in same
    off = server_env(_config(multicast=False), machine)
    assert {k: off[k] for k in NO_MULTICAST} == NO_MULTICAST
    on = server_env(_config(multicast=True), {**machine, **NO_MULTICAST})
    assert not set(NO_MULTICAST) & set(on)
    env = server_env(_config(env={"SGLANG_ENABLE_SPEC_V2": "1"}), machine)
    assert env["SGLANG_ENABLE_SPEC_V2"] == "1" and env["PATH"] == "/bin"


def test_server_start_failure(python: Path, tmp_path: Path) -> None:
    result = run_gate(_config("--fake-mode", "crash-start"), python=python,
                      log_dir=tmp_path)
    assert len(result.phases) == 1  # no speculative phase after a failed baseline
    assert result.checks[0].name == "gate-preflight"
    assert result.checks[1].status == "fail"
    assert result.checks[1].reason == (
        "baseline: server exited with code 3 before it was healthy: "
        "RuntimeError: CUDA error: out of memory")


def test_slow_health_times_out(python: Path, tmp_path: Path) -> None:
    result = run_gate(_config("--fake-mode", "slow-health", startup_timeout=2.0),
                      python=python, log_dir=tmp_path)
    reason = result.checks[1].reason
    assert reason.startswith("baseline: server not healthy after 2 s (startup-timeout)")
    assert _all_gone(_pids(tmp_path / "server-baseline.log"))


def test_crash_mid_run(python: Path, tmp_path: Path) -> None:
    result = run_gate(_config("--fake-mode", "crash-after=2", spec=False,
                              concurrency=(1,), rounds=2),
                      python=python, log_dir=tmp_path)
    phase = result.phases[0]
    assert phase.levels[0].completed == 1  # request 1 was the warm-up
    assert phase.error is not None
    assert phase.error.startswith("server exited with code 7 during concurrency 1")
    assert result.checks[1].status == "fail"
    assert _all_gone(_pids(tmp_path / "server-baseline.log"))


SCRIPT = """
import signal
import sys
from pathlib import Path
# Ctrl-C's own handler, whatever the runner's was (a shell running the suite
# in the background starts it with SIGINT ignored, and children inherit that)
signal.signal(signal.SIGINT, signal.default_int_handler)
from stacklock.validation import GateConfig
from stacklock.validate.gate import run_gate, server_env
from stacklock.validate.gate_preflight import check_server_args
from stacklock.validation import NO_MULTICAST
config = GateConfig(engine="sglang", model="m", server_args=("--fake-mode", "slow"),
                    output_tokens=4, concurrency=(1,), rounds=1)
run_gate(config, python=Path(sys.argv[1]), log_dir=Path(sys.argv[2]))
"""


def test_ctrl_c_stops_the_server_group(python: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(python), str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    log = tmp_path / "server-baseline.log"
    deadline = time.monotonic() + 180  # bounds, not timings: a loaded box is slow
    while time.monotonic() < deadline:
        if log.exists() and "fired up" in log.read_text():
            break
        time.sleep(0.1)
    pids = _pids(log)
    assert len(pids) == 2 and not any(_gone(pid) for pid in pids)
    time.sleep(0.5)  # let the request reach the server's 30 s first-token wait
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in stderr
    assert _all_gone(pids)


def test_preflight_without_sglang_in_the_venv(tmp_path: Path) -> None:
    """A venv whose sglang does not import fails the gate before any launch."""
    bare = make_venv(tmp_path / "bare")
    check = check_server_args(bare, {"baseline": ["--model-path", "m"]},
                              env=dict(os.environ))
    assert check.status == "fail"
    assert check.reason == (f"SGLang's server arguments cannot be read in {bare}: "
                            "ModuleNotFoundError: No module named 'sglang'")
