"""GPU-side checks on what the H200 machine really reported, and the probe merge."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from stacklock.errors import ValidateError
from stacklock.lock import Lock, load_lock
from stacklock.validate.gpuchecks import (
    check_driver_runs_toolkit,
    check_probes,
    check_torch,
)
from stacklock.validate.probes import ProbeResult, _merge, probe_env, run_gpu_probes
from stacklock.validate.report import ValidateResult
from stacklock.validation import ProbeConfig
from tests.helpers.wheelkit import make_venv

H200 = Path(__file__).resolve().parents[1] / "data" / "validate" / "h200"


@pytest.fixture
def info() -> dict:
    return json.loads((H200 / "venv-info.json").read_text())


@pytest.fixture
def lock() -> Lock:
    return load_lock(H200 / "pylock.h200-cu130.toml")


def _by_name(results: list) -> dict:
    return {r.name: r for r in results}


def test_h200_torch_facts_pass(info: dict, lock: Lock) -> None:
    results = _by_name(check_torch(info, lock, min_gpus=1))
    assert {n: r.status for n, r in results.items()} == {
        "torch-cuda": "pass", "gpu-count": "pass", "gpu-arch": "pass", "nccl": "pass"}
    assert results["nccl"].reason == "NCCL 2.28.9 from nvidia-nccl-cu13 2.28.9"
    assert results["gpu-arch"].reason == ("sm_90 in torch's arch list and the "
                                          "profile's gpu-arch")


def test_profile_for_blackwell_fails_on_hopper(info: dict, lock: Lock) -> None:
    assert lock.stack is not None and lock.stack.target is not None
    target = replace(lock.stack.target, gpu_arch=("sm_120",))
    blackwell = replace(lock, stack=replace(lock.stack, target=target))
    results = _by_name(check_torch(info, blackwell, min_gpus=8))
    assert results["gpu-arch"].status == "fail"
    assert results["gpu-arch"].reason == ("GPU 0 is sm_90, the profile's gpu-arch is "
                                          "sm_120")
    assert results["gpu-count"].status == "fail"
    assert results["gpu-count"].reason == ("torch sees 1 GPU (NVIDIA H200); "
                                           "8 needed")


def test_torch_without_kernels_for_the_gpu(info: dict) -> None:
    old = dict(info, arch_list=["sm_50", "sm_60"])
    result = _by_name(check_torch(old, None, min_gpus=None))["gpu-arch"]
    assert result.status == "fail"
    assert result.reason == ("GPU 0 NVIDIA H200 is sm_90, torch has kernels for "
                             "sm_50 sm_60")


def test_torch_built_for_another_cuda(info: dict, lock: Lock) -> None:
    cu128 = dict(info, torch_version="2.9.1+cu128", torch_cuda="12.8")
    result = _by_name(check_torch(cu128, lock, min_gpus=None))["torch-cuda"]
    assert result.status == "fail"
    assert result.reason == ("torch 2.9.1+cu128 is built for CUDA 12.8, the lock "
                             "says 13.0")


def test_nccl_other_than_locked(info: dict, lock: Lock) -> None:
    result = _by_name(check_torch(dict(info, nccl_version="2.27.3"), lock,
                                  min_gpus=None))["nccl"]
    assert result.status == "fail"
    assert result.reason == ("torch loads NCCL 2.27.3, the lock has nvidia-nccl-cu13 "
                             "2.28.9")


def test_driver_from_env_against_locked_toolkit(lock: Lock,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_DRIVER_VERSION", "580.159.04")
    assert check_driver_runs_toolkit(lock, "13.0").status == "pass"
    monkeypatch.setenv("STACKLOCK_DRIVER_VERSION", "570.86.10")
    old = check_driver_runs_toolkit(lock, "13.0")
    assert old.status == "fail"
    assert "570.86.10" in old.reason and "580" in old.reason


def test_probe_environment_never_allows_multicast(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    env = probe_env()
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"


def _rank(rank: int, eager: float, graph: float, tflops: float,
          finite: bool = True) -> dict:
    """One rank's JSON as ``_probe_script.py bench`` prints it."""
    return {"rank": rank, "device": "NVIDIA H200", "allreduce_correct": True,
            "allreduce": [{"bytes": 43008, "correct": True, "eager_us": eager,
                           "graph_us": graph, "finite": finite}],
            "matmul_n": 8192, "matmul_tflops": tflops}


def test_merge_takes_the_slowest_rank_and_nccl_bus_bandwidth() -> None:
    merged = _merge(2, [_rank(0, 30.0, 10.0, 790.0), _rank(1, 35.0, 12.0, 780.0)], [])
    row = merged.row(43008)
    assert row is not None
    assert (row.eager_us, row.graph_us) == (35.0, 12.0)
    # NCCL's busbw for all-reduce: bytes / time * 2 (n - 1) / n
    assert row.busbw_gbps == pytest.approx(43008 / 12e-6 * 2 * 1 / 2 / 1e9)
    assert merged.matmul_tflops == (790.0, 780.0)
    failed = _merge(2, [_rank(0, 30.0, 10.0, 790.0)], ["rank 1 exited 1: NCCL error"])
    assert failed.allreduce == () and not failed.allreduce_correct


def test_probe_thresholds_on_the_real_numbers() -> None:
    """The H200 report: one GPU, so no all-reduce to judge, whatever the limits."""
    result = ValidateResult.from_dict(json.loads((H200 / "report.json").read_text()))
    probes = result.probes
    assert isinstance(probes, ProbeResult)
    strict = ProbeConfig(max_allreduce_us={43008: 0.01}, min_matmul_tflops=5000.0)
    checks = _by_name(check_probes(probes, strict))
    assert checks["allreduce"].status == "skip"
    assert checks["allreduce"].reason == probes.allreduce_skipped
    assert checks["matmul"].status == "fail"
    assert checks["matmul"].reason.endswith("(< 5000.0)")
    loose = _by_name(check_probes(probes, ProbeConfig()))
    assert loose["matmul"].status == "measured"  # no min-matmul-tflops: no verdict
    assert loose["matmul"].reason.endswith("(no min-matmul-tflops)")


def test_two_gpu_thresholds_and_measured() -> None:
    merged = _merge(2, [_rank(0, 30.0, 10.0, 790.0), _rank(1, 35.0, 12.0, 780.0)], [])
    assert merged.allreduce_correct and merged.allreduce_skipped is None
    measured = _by_name(check_probes(merged, ProbeConfig()))["allreduce"]
    assert measured.status == "measured"
    assert measured.reason == ("1 sizes on 2 GPUs, correct sum; 42 KB: 35.0 us "
                               "eager, 12.00 us in a CUDA graph (no max-allreduce-us)")
    judged = _by_name(check_probes(merged, ProbeConfig(
        max_allreduce_us={43008: 60.0})))["allreduce"]
    assert judged.status == "pass"
    slow = _by_name(check_probes(merged, ProbeConfig(
        max_allreduce_us={43008: 11.0})))["allreduce"]
    assert (slow.status, slow.reason) == ("fail", "42 KB 12.00 us > 11.0 us")


def test_a_tensor_that_is_no_longer_finite_fails() -> None:
    merged = _merge(2, [_rank(0, 30.0, 10.0, 790.0),
                        _rank(1, 35.0, 12.0, 780.0, finite=False)], [])
    assert not merged.allreduce_correct
    assert merged.errors == ("rank 1 42 KB: the reduced tensor is no longer finite",)
    check = _by_name(check_probes(merged, ProbeConfig()))["allreduce"]
    assert check.status == "fail"


def test_one_gpu_skips_the_allreduce() -> None:
    one = {k: v for k, v in _rank(0, 0, 0, 800.0).items()
           if not k.startswith("allreduce")}
    merged = _merge(1, [one], [])
    assert merged.allreduce == () and merged.allreduce_skipped is not None
    assert merged.allreduce_skipped.startswith("1 GPU: an all-reduce needs 2")
    assert merged.matmul_tflops == (800.0,)


def test_ranks_are_waited_on_together(tmp_path: Path) -> None:
    """A rank that fails while another waits (as in a collective) ends the wait
    after the grace, not at the timeout; output goes to files, so a rank that
    writes a megabyte blocks on nothing."""
    import subprocess
    import sys

    from stacklock.validate.probes import _wait_all

    scripts = ["import sys; sys.stderr.write('x' * 1_000_000); sys.exit(1)",
               "import time; time.sleep(300)"]
    procs = []
    for i, code in enumerate(scripts):
        with open(tmp_path / f"{i}.err", "wb") as err:
            procs.append(subprocess.Popen([sys.executable, "-c", code], stderr=err,
                                          start_new_session=True))
    why = _wait_all(procs, timeout=120, grace=0.5)
    assert why == ("rank 0 failed; the ranks still waiting in the collective were "
                   "stopped 0.5 s later")
    assert procs[1].returncode == -9
    assert (tmp_path / "0.err").stat().st_size == 1_000_000


def test_probe_ranks_that_cannot_start_are_reported(tmp_path: Path) -> None:
    """One real process per 'GPU' with an interpreter that has no torch: every rank
    fails, and the failure reaches the allreduce check instead of hanging."""
    python = make_venv(tmp_path / "venv")
    result = run_gpu_probes(python, gpus=2, sizes=(4096,), timeout=120)
    assert result.world == 2 and result.allreduce == ()
    assert [e.split(":")[0] for e in result.errors] == ["rank 0 exited 1",
                                                         "rank 1 exited 1"]
    assert all("No module named 'torch'" in e for e in result.errors)
    check = check_probes(result, ProbeConfig())[0]
    assert (check.name, check.status) == ("allreduce", "fail")
    alone = run_gpu_probes(python, gpus=1, sizes=(4096,), timeout=120)
    checks = _by_name(check_probes(alone, ProbeConfig()))
    assert checks["allreduce"].status == "skip"
    assert checks["matmul"].status == "fail"  # the one rank's failure is not lost
    assert "No module named 'torch'" in checks["matmul"].reason
    with pytest.raises(ValidateError, match="at least one GPU"):
        run_gpu_probes(python, gpus=0)


def test_no_gpu_is_a_skip_only_when_allowed(info: dict, lock: Lock) -> None:
    """The H200's torch facts as a machine without a GPU reports them: no device.
    gpu-count fails, unless --allow-no-gpu; a CPU build of torch fails either way."""
    none = dict(info, device_count=0, devices=[], cuda_available=False,
                nccl_version=None)
    failed = _by_name(check_torch(none, lock, min_gpus=None))["gpu-count"]
    assert failed.status == "fail"
    assert failed.reason == "torch sees 0 GPUs (none); 1 needed"
    skipped = _by_name(check_torch(none, lock, min_gpus=8, allow_no_gpu=True))
    assert skipped["gpu-count"].status == "skip"
    assert skipped["gpu-count"].reason == ("no GPU here (--allow-no-gpu); 8 needed "
                                           "to run")
    assert skipped["gpu-arch"].status == skipped["nccl"].status == "skip"
    cpu = dict(none, torch_version="2.11.0+cpu", torch_cuda=None)
    still = _by_name(check_torch(cpu, lock, min_gpus=None, allow_no_gpu=True))
    assert still["torch-cuda"].status == "fail"


def test_torch_that_cannot_load_libcuda_is_skipped_only_when_allowed(
        lock: Lock) -> None:
    error = {"error": "ImportError: libcuda.so.1: cannot open shared object file: "
                      "No such file or directory"}
    [failed] = check_torch(error, lock, min_gpus=None)
    assert failed.status == "fail"
    [skipped] = check_torch(error, lock, min_gpus=None, allow_no_gpu=True)
    assert skipped.status == "skip" and "libcuda.so.1" in skipped.reason
    other = {"error": "ImportError: libtorch_cuda.so: cannot open shared object file"}
    [still] = check_torch(other, lock, min_gpus=None, allow_no_gpu=True)
    assert still.status == "fail"
