"""One validation run: named checks, GPU probes and the throughput gate, then the
report.

``validate(lock, venv=...)`` (a :class:`~stacklock.lock.Lock`, read by the caller)
returns a :class:`ValidateResult`; ``result.ok`` is the
verdict (any failed check fails it, skipped checks do not). It raises
``ValidateError`` only when validation cannot run at all (no python, no lock).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from stacklock.errors import ValidateError
from stacklock.validate.checks import (
    FAIL,
    SKIP,
    CheckResult,
    check_distributions,
    check_uv_pip_check,
    check_wheel_hashes,
)
from stacklock.validate.config import ValidateConfig, parse_validate_config
from stacklock.validate.gate import run_gate
from stacklock.validate.gpuchecks import (
    check_driver_runs_toolkit,
    check_probes,
    check_toolkit,
    check_torch,
)
from stacklock.validate.imports import check_imports
from stacklock.validate.probes import (
    PROBE_SCRIPT,
    last_json,
    probe_env,
    read_venv_info,
    run_gpu_probes,
)
from stacklock.validate.report import (
    ValidateResult,
    write_report,
)

if TYPE_CHECKING:
    from stacklock.lock import Lock

__all__ = ["read_distributions", "validate", "validate_install", "venv_python"]


def venv_python(venv: str | Path | None, python: str | Path | None) -> Path:
    """The interpreter of the environment under check: ``--python`` wins; else
    ``<venv>/bin/python``."""
    if python is not None:
        path = Path(python)
    elif venv is not None:
        path = Path(venv) / "bin" / "python"
    else:
        raise ValidateError("no environment to validate",
                            hint="pass --venv DIR (the venv install made) or --python")
    if not path.exists():
        raise ValidateError(f"{path} does not exist",
                            hint="pass --venv DIR of a venv, or --python PATH")
    return path


def read_distributions(python: Path, *, timeout: float = 120.0) -> dict[str, Any]:
    """Every installed distribution, as the venv's own python lists them."""
    import subprocess

    try:
        proc = subprocess.run([str(python), str(PROBE_SCRIPT), "dists"],
                              capture_output=True, text=True, timeout=timeout,
                              env=probe_env(), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValidateError(f"{python} cannot list its distributions: {exc}") from exc
    data = last_json(proc.stdout)
    if data is None or "distributions" not in data:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValidateError(f"{python} cannot list its distributions: {tail}",
                            hint="is it a Python 3.9+ interpreter?")
    return data


def _lock_checks(lock: Lock | None, dists: dict[str, Any],
                 python: Path) -> list[CheckResult]:
    if lock is None:
        why = "no lock given"
        return [CheckResult(name="distributions", status=SKIP, reason=why),
                CheckResult(name="wheel-hashes", status=SKIP, reason=why),
                check_uv_pip_check(None, python)]
    return [check_distributions(lock, dists), check_wheel_hashes(lock, dists),
            check_uv_pip_check(lock, python)]


def validate(
    lock: Lock | None,
    *,
    venv: str | Path | None = None,
    python: str | Path | None = None,
    gate: bool = True,
    probes: bool = True,
    report_dir: str | Path | None = None,
    toolkit_prefix: str | Path | None = None,
) -> ValidateResult:
    """Run every check; write the report to ``report_dir`` when given."""
    exe = venv_python(venv, python)
    config = (parse_validate_config(lock.validate, path=lock.path,
                                    prefix="tool.stacklock.validate")
              if lock is not None else ValidateConfig())
    dists = read_distributions(exe)
    checks = _lock_checks(lock, dists, exe)
    checks.append(check_toolkit(lock, prefix=Path(toolkit_prefix)
                                if toolkit_prefix else None))
    info = read_venv_info(exe)
    torch_cuda = info.get("torch_cuda") if "error" not in info else None
    checks.append(check_driver_runs_toolkit(lock, torch_cuda))
    checks.extend(check_torch(info, lock, min_gpus=config.min_gpus))
    checks.extend(check_imports(exe, config.imports, dists, lock))
    probe_result = None
    gpus = int(info.get("device_count") or 0)
    if not probes or not config.probes.enabled:
        why = "--no-probes" if not probes else "[validate.probes] enabled = false"
        checks.append(CheckResult(name="allreduce", status=SKIP, reason=why))
    elif gpus == 0:
        why = "torch sees no GPU" if torch_cuda else "no CUDA build of torch to probe"
        checks.append(CheckResult(name="allreduce", status=SKIP, reason=why))
    else:
        try:
            probe_result = run_gpu_probes(exe, gpus=gpus, sizes=config.probes.sizes,
                                          iters=config.probes.iters,
                                          matmul_n=config.probes.matmul_n,
                                          timeout=config.probes.timeout)
        except ValidateError as exc:  # a hung NCCL group is a finding, not a crash
            checks.append(CheckResult(name="allreduce", status=FAIL, reason=str(exc)))
        else:
            checks.extend(check_probes(probe_result, config.probes))
    gate_result = None
    folder = Path(report_dir) if report_dir is not None else None
    if config.gate is not None and gate:
        log_dir = folder or Path.cwd() / "stacklock-validate"
        gate_result = run_gate(config.gate, python=exe, log_dir=log_dir)
    result = ValidateResult(lock=lock.path if lock is not None else None,
                            python=str(exe), checks=tuple(checks), venv_info=info,
                            probes=probe_result, gate=gate_result)
    if folder is None:
        return result
    files = write_report(result, folder)
    return ValidateResult(lock=result.lock, python=result.python, checks=result.checks,
                          venv_info=info, probes=probe_result, gate=gate_result,
                          files=files)


def validate_install(lock: Lock, venv: str | Path) -> ValidateResult:
    """What ``stacklock install`` runs at its end: every check, the gate
    included, with the report in ``./stacklock-validate``."""
    return validate(lock, venv=venv, report_dir=Path.cwd() / "stacklock-validate")
