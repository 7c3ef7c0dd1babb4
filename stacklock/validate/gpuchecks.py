"""Checks of the layers under the wheels: the driver, and what torch inside the venv
sees (CUDA, GPUs, compute capabilities, NCCL), plus the probe numbers against the
profile's thresholds. The toolkit's check is in :mod:`stacklock.validate.toolkit`.

Driver facts are read and judged by ``stacklock.cuda`` (the driver table); this
module only turns them into named results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stacklock.cuda.catalog import load_catalog
from stacklock.cuda.driver import check_driver, read_driver
from stacklock.errors import CudaError
from stacklock.validate.checks import (
    FAIL,
    MEASURED,
    PASS,
    SKIP,
    CheckResult,
    needs_driver,
)
from stacklock.validate.probes import format_size
from stacklock.validate.toolkit import major_minor as _major_minor
from stacklock.words import counted

if TYPE_CHECKING:
    from stacklock.lock import Lock
    from stacklock.validate.probes import ProbeResult
    from stacklock.validation import ProbeConfig

__all__ = [
    "check_driver_runs_toolkit",
    "check_probes",
    "check_torch",
]


def check_driver_runs_toolkit(lock: Lock | None, torch_cuda: str | None, *,
                              allow_no_gpu: bool = False) -> CheckResult:
    """The driver can run the locked toolkit and the CUDA the torch wheel targets;
    no driver at all is a skip under ``allow_no_gpu`` (a driver too old is not)."""
    name = "driver"
    toolkit = lock.cuda.version if lock is not None and lock.cuda else None
    wheels = {"torch": _major_minor(torch_cuda) or torch_cuda} if torch_cuda else {}
    if toolkit is None and not wheels:
        return CheckResult(name=name, status=SKIP,
                           reason="no toolkit locked and no CUDA build of torch")
    try:
        driver = read_driver()
    except CudaError as exc:
        if allow_no_gpu:
            return CheckResult(name=name, status=SKIP,
                               reason=f"no driver here (--allow-no-gpu): {exc.message}")
        return CheckResult(name=name, status=FAIL, reason=str(exc))
    try:
        report = check_driver(load_catalog(), driver, toolkit=toolkit, wheels=wheels)
    except CudaError as exc:
        return CheckResult(name=name, status=FAIL, reason=str(exc))
    details = report.to_dict()
    bad = [c for c in report.checks if not c.ok]
    if bad:
        return CheckResult(name=name, status=FAIL, details=details,
                           reason="; ".join(f"{c.subject}: {c.reason}" for c in bad))
    return CheckResult(name=name, status=PASS, details=details,
                       reason=f"driver {driver.version} ({driver.source}) runs "
                       + ", ".join(c.subject for c in report.checks))


def _family(arch: str) -> str:
    """``sm_90a`` / ``sm_100f`` -> ``sm_90`` / ``sm_100`` (arch-specific variants)."""
    return arch.rstrip("af") if arch.startswith("sm_") else arch


def _locked_cuda(lock: Lock | None, name: str) -> str | None:
    pkg = lock.package(name) if lock is not None else None
    if pkg is None:
        return None
    if pkg.cuda:
        return _major_minor(pkg.cuda)
    local = pkg.version.local if pkg.version is not None else None
    if local and local.startswith("cu") and local[2:].isdigit():
        digits = local[2:]
        return f"{digits[:-1]}.{digits[-1]}"
    return None


def check_torch(info: dict[str, Any], lock: Lock | None, *,
                min_gpus: int | None, allow_no_gpu: bool = False) -> list[CheckResult]:
    """torch-cuda, gpu-count, gpu-arch, nccl: what torch in the venv sees; with
    ``allow_no_gpu`` no GPU at all is a skip, not a failed gpu-count."""
    if "error" in info:
        absent = str(info["error"]).startswith("ModuleNotFoundError")
        locked = lock is not None and lock.package("torch") is not None
        if absent and not locked:
            return [CheckResult(name="torch", status=SKIP,
                                reason="torch is neither installed nor locked")]
        if allow_no_gpu and needs_driver(str(info["error"])):
            return [CheckResult(name="torch", status=SKIP,
                                reason=f"torch needs the driver's libcuda.so.1 to "
                                f"load (--allow-no-gpu): {info['error']}")]
        return [CheckResult(name="torch", status=FAIL,
                            reason=f"torch probe failed: {info['error']}")]
    out: list[CheckResult] = []
    torch_cuda = info.get("torch_cuda")
    want = _locked_cuda(lock, "torch")
    if torch_cuda is None:
        out.append(CheckResult(name="torch-cuda", status=FAIL,
                               reason=f"torch {info.get('torch_version')} is a CPU "
                               "build"))
    elif want is not None and _major_minor(str(torch_cuda)) != want:
        out.append(CheckResult(name="torch-cuda", status=FAIL,
                               reason=f"torch {info.get('torch_version')} is built for "
                               f"CUDA {torch_cuda}, the lock says {want}"))
    else:
        extra = " as locked" if want else " (the lock names no CUDA for torch)"
        out.append(CheckResult(name="torch-cuda", status=PASS,
                               reason=f"torch {info.get('torch_version')} built for "
                               f"CUDA {torch_cuda}{extra}"))
    count = int(info.get("device_count") or 0)
    need = min_gpus if min_gpus is not None else 1
    names = sorted({d["name"] for d in info.get("devices", [])})
    status = PASS if count >= need else FAIL
    seen = (f"torch sees {counted(count, 'GPU')} ({', '.join(names) or 'none'}); "
            f"{need} needed")
    if count == 0 and allow_no_gpu:
        status, seen = SKIP, f"no GPU here (--allow-no-gpu); {need} needed to run"
    out.append(CheckResult(name="gpu-count", status=status, reason=seen,
                           details={"device_count": count, "needed": need}))
    arch_list = [str(a) for a in info.get("arch_list", [])]
    target = lock.target if lock is not None else None
    locked_arch = {_family(a) for a in (target.gpu_arch if target else ())}
    bad: list[str] = []
    for dev in info.get("devices", []):
        sm = str(dev["sm"])
        if sm not in {_family(a) for a in arch_list}:
            bad.append(f"GPU {dev['index']} {dev['name']} is {sm}, torch has kernels "
                       f"for {' '.join(arch_list) or 'none'}")
        if locked_arch and sm not in locked_arch:
            bad.append(f"GPU {dev['index']} is {sm}, the profile's gpu-arch is "
                       f"{' '.join(sorted(locked_arch))}")
    sms = sorted({str(d["sm"]) for d in info.get("devices", [])})
    if not info.get("devices"):
        out.append(CheckResult(name="gpu-arch", status=SKIP, reason="no GPU visible"))
    elif bad:
        out.append(CheckResult(name="gpu-arch", status=FAIL, reason="; ".join(bad)))
    else:
        where = " and the profile's gpu-arch" if locked_arch else ""
        out.append(CheckResult(name="gpu-arch", status=PASS,
                               reason=f"{', '.join(sms)} in torch's arch list{where}"))
    out.append(_check_nccl(info, lock))
    return out


def _check_nccl(info: dict[str, Any], lock: Lock | None) -> CheckResult:
    nccl = info.get("nccl_version")
    if nccl is None:
        status = FAIL if info.get("device_count") else SKIP
        return CheckResult(name="nccl", status=status,
                           reason=str(info.get("nccl_error", "torch reports no NCCL")))
    pkgs = [p for n, p in (lock.by_name.items() if lock is not None else ())
            if n.startswith("nvidia-nccl")]
    if not pkgs:
        return CheckResult(name="nccl", status=PASS,
                           reason=f"torch uses NCCL {nccl} (no nvidia-nccl wheel "
                           "locked)")
    pkg = pkgs[0]
    locked = pkg.version.release[:3] if pkg.version is not None else ()
    if tuple(int(p) for p in str(nccl).split(".")) != tuple(locked):
        return CheckResult(name="nccl", status=FAIL,
                           reason=f"torch loads NCCL {nccl}, the lock has {pkg.name} "
                           f"{pkg.version}")
    return CheckResult(name="nccl", status=PASS,
                       reason=f"NCCL {nccl} from {pkg.name} {pkg.version}")


def _check_allreduce(result: ProbeResult, config: ProbeConfig) -> CheckResult:
    rows = {r.bytes: r for r in result.allreduce}
    row42 = rows.get(43008)
    summary = (f"42 KB: {row42.eager_us:.1f} us eager, "
               f"{row42.graph_us:.2f} us in a CUDA graph" if row42 and
               row42.graph_us is not None else "")
    limits = {"limits_us": {format_size(k): v
                            for k, v in config.max_allreduce_us.items()}}
    if result.allreduce_skipped:
        return CheckResult(name="allreduce", status=SKIP,
                           reason=result.allreduce_skipped, details=limits)
    if result.errors and not result.allreduce:
        return CheckResult(name="allreduce", status=FAIL,
                           reason="; ".join(result.errors[:2]))
    if not result.allreduce_correct:
        return CheckResult(name="allreduce", status=FAIL,
                           reason="all-reduce over NCCL gave a wrong sum or a "
                           "tensor that is no longer finite")
    slow = []
    for size, limit in sorted(config.max_allreduce_us.items()):
        row = rows.get(size)
        got: float | None = None
        if row is not None:
            got = row.graph_us if row.graph_us is not None else row.eager_us
        if got is None or got > limit:
            shown = "not measured" if got is None else f"{got:.2f} us"
            slow.append(f"{format_size(size)} {shown} > {limit} us")
    measured = (f"{len(rows)} sizes on {result.world} GPUs, correct sum"
                + (f"; {summary}" if summary else ""))
    if slow:
        return CheckResult(name="allreduce", status=FAIL, reason="; ".join(slow),
                           details=limits)
    if not config.max_allreduce_us:
        return CheckResult(name="allreduce", status=MEASURED, details=limits,
                           reason=f"{measured} (no max-allreduce-us)")
    return CheckResult(name="allreduce", status=PASS, reason=measured, details=limits)


def check_probes(result: ProbeResult, config: ProbeConfig) -> list[CheckResult]:
    """allreduce and matmul against the profile's thresholds: "measured" where the
    profile sets none, a skip with its reason where nothing could be measured."""
    out = [_check_allreduce(result, config)]
    if not result.matmul_tflops and result.errors and result.allreduce_skipped:
        out.append(CheckResult(name="matmul", status=FAIL,
                               reason="; ".join(result.errors[:2])))
    elif result.matmul_tflops:
        low = min(result.matmul_tflops)
        floor = config.min_matmul_tflops
        reason = (f"bf16 {result.matmul_n}^3: {low:.0f} TFLOP/s on the slowest of "
                  f"{counted(len(result.matmul_tflops), 'GPU')}")
        if floor is None:
            out.append(CheckResult(name="matmul", status=MEASURED,
                                   reason=f"{reason} (no min-matmul-tflops)"))
        else:
            ok = low >= floor
            out.append(CheckResult(name="matmul", status=PASS if ok else FAIL,
                                   reason=f"{reason} ({'>=' if ok else '<'} {floor})"))
    return out
