"""One validation run: named checks, GPU probes and the throughput gate, then the
report.

``validate(lock, venv=...)`` (a :class:`~stacklock.lock.Lock`, read by the caller)
returns a :class:`ValidateResult`; ``result.ok`` is the
verdict (any failed check fails it, skipped checks do not). It raises
``ValidateError`` only when validation cannot run at all (no python, no lock).
"""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from stacklock._fs import check_writable
from stacklock.bounded import Malformed, read_regular, shorten
from stacklock.errors import RecordError, ValidateError
from stacklock.record import load_record
from stacklock.validate.checks import (
    FAIL,
    SKIP,
    CheckResult,
    check_distributions,
    check_patches,
    check_uv_pip_check,
    check_wheel_hashes,
)
from stacklock.validate.gate import run_gate
from stacklock.validate.gpuchecks import (
    check_driver_runs_toolkit,
    check_probes,
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
from stacklock.validate.toolkit import check_toolkit
from stacklock.validation import ValidateConfig, parse_validate_config

if TYPE_CHECKING:
    from stacklock.lock import Lock
    from stacklock.validate.probes import ProbeResult

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
                              capture_output=True, text=True, errors="replace",
                              timeout=timeout,
                              env=probe_env(), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValidateError(f"{python} cannot list its distributions: {exc}") from exc
    data = last_json(proc.stdout)
    if data is None or "distributions" not in data:
        said = data.get("error") if isinstance(data, dict) else None
        tail = said or (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValidateError(f"{python} cannot list its distributions: "
                            f"{shorten(str(tail))}",
                            hint="is it a Python 3.9+ interpreter?")
    data["modules"] = _modules(data["distributions"])
    return data


def _modules(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Top-level module -> the distributions it comes from, as
    ``importlib.metadata.packages_distributions`` says, from each dist-info's
    ``top_level.txt``, else the ``.py`` files its RECORD lists (read by the
    RECORD reader: a RECORD it refuses adds nothing here, and fails the
    wheel-hashes check)."""
    out: dict[str, set[str]] = {}
    for row in rows:
        if not row.get("dist_info"):
            continue
        for module in _top_level(Path(row["dist_info"])):
            out.setdefault(module, set()).add(str(row["name"]))
    return {module: sorted(names) for module, names in out.items()}


def _top_level(dist_info: Path) -> set[str]:
    try:
        declared = read_regular(dist_info / "top_level.txt", limit=1 << 20)
    except (OSError, Malformed):
        declared = b""
    names = set(declared.decode("utf-8", "replace").split())
    if names:
        return names
    try:
        record = load_record(dist_info)
    except RecordError:
        return set()
    if record is None:
        return set()
    paths = [PurePosixPath(p) for p in record.entries if p.endswith(".py")]
    return {p.parts[0] if len(p.parts) > 1 else p.stem for p in paths}


def _lock_checks(lock: Lock | None, dists: dict[str, Any],
                 python: Path) -> list[CheckResult]:
    if lock is None:
        why = "no lock given"
        return [CheckResult(name="distributions", status=SKIP, reason=why),
                CheckResult(name="wheel-hashes", status=SKIP, reason=why),
                check_uv_pip_check(None, python)]
    checks = [check_distributions(lock, dists), check_wheel_hashes(lock, dists)]
    patches = check_patches(lock, dists)  # only a lock with patches has the line
    return [*checks, *([patches] if patches is not None else []),
            check_uv_pip_check(lock, python)]


def _gpu_checks(exe: Path, lock: Lock | None, config: ValidateConfig,
                info: dict[str, Any], dists: dict[str, Any], *, probes: bool,
                allow_no_gpu: bool) -> tuple[list[CheckResult], ProbeResult | None]:
    """driver, torch, imports and the probes; with ``allow_no_gpu`` what fails
    only for want of a driver or a GPU is a skip with its reason."""
    torch_cuda = info.get("torch_cuda") if "error" not in info else None
    checks = [check_driver_runs_toolkit(lock, torch_cuda, allow_no_gpu=allow_no_gpu)]
    checks.extend(check_torch(info, lock, min_gpus=config.min_gpus,
                              allow_no_gpu=allow_no_gpu))
    checks.extend(check_imports(exe, config.imports, dists, lock,
                                allow_no_gpu=allow_no_gpu))
    gpus = int(info.get("device_count") or 0)
    if not probes or not config.probes.enabled:
        why = "--no-probes" if not probes else "[validate.probes] enabled = false"
        checks.append(CheckResult(name="allreduce", status=SKIP, reason=why))
        return checks, None
    if gpus == 0:
        why = "torch sees no GPU" if torch_cuda else "no CUDA build of torch to probe"
        checks.append(CheckResult(name="allreduce", status=SKIP, reason=why))
        return checks, None
    try:
        result = run_gpu_probes(exe, gpus=gpus, sizes=config.probes.sizes,
                                iters=config.probes.iters,
                                matmul_n=config.probes.matmul_n,
                                timeout=config.probes.timeout)
    except ValidateError as exc:  # a hung NCCL group is a finding, not a crash
        checks.append(CheckResult(name="allreduce", status=FAIL, reason=str(exc)))
        return checks, None
    checks.extend(check_probes(result, config.probes))
    return checks, result


def validate(
    lock: Lock | None,
    *,
    venv: str | Path | None = None,
    python: str | Path | None = None,
    gate: bool = True,
    probes: bool = True,
    report_dir: str | Path | None = None,
    toolkit_prefix: str | Path | None = None,
    allow_no_gpu: bool = False,
    by_markers: bool = True,
) -> ValidateResult:
    """Run every check; write the report to ``report_dir`` when given.

    ``allow_no_gpu`` (an image build): checks that need a driver or a GPU are
    skipped with the reason when there is none, never failed; an import that
    fails only because the driver's ``libcuda.so.1`` is absent is one of them.
    ``by_markers``: a lock another tool wrote is held to the packages whose
    markers hold for the venv's python (its default groups), not to the ones
    other platforms and groups install; install, which knows what it installed,
    passes exactly that lock and turns this off.
    """
    if report_dir is not None:  # a bad --report fails now, not after the gate
        check_writable(Path(report_dir) / "report.json", example="report.json")
    exe = venv_python(venv, python)
    if by_markers and lock is not None and lock.stack is None \
            and lock.snapshot is None:
        lock = _applying(lock, exe)
    config = (parse_validate_config(lock.validate, path=lock.path,
                                    prefix="tool.stacklock.validate")
              if lock is not None else ValidateConfig())
    dists = read_distributions(exe)
    checks = _lock_checks(lock, dists, exe)
    checks.append(check_toolkit(lock, prefix=Path(toolkit_prefix)
                                if toolkit_prefix else None, dists=dists))
    info = read_venv_info(exe)
    more, probe_result = _gpu_checks(exe, lock, config, info, dists, probes=probes,
                                     allow_no_gpu=allow_no_gpu)
    checks.extend(more)
    gate_result = None
    folder = Path(report_dir) if report_dir is not None else None
    no_gpu = allow_no_gpu and not int(info.get("device_count") or 0)
    if config.gate is not None and gate and no_gpu and config.gate.engine != "openai":
        checks.append(CheckResult(name="gate", status=SKIP,
                                  reason=f"no GPU here to serve "
                                  f"{config.gate.model} (--allow-no-gpu)"))
    elif config.gate is not None and gate:
        # the server logs go with the report; without one, to a fresh temporary
        # folder (named in the gate's findings), never into the working directory
        log_dir = folder or Path(tempfile.mkdtemp(prefix="stacklock-gate-"))
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


def _applying(lock: Lock, python: Path) -> Lock:
    """``lock`` with the packages whose markers hold for ``python``."""
    import subprocess
    from dataclasses import replace

    from stacklock.bounded import parse_json
    from stacklock.pyenv import marker_env_code

    try:
        out = subprocess.run([str(python), "-c", marker_env_code(
            "print(json.dumps(env))")], capture_output=True, text=True,
            timeout=60, check=True).stdout
        env = parse_json(out)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise ValidateError(f"{python} cannot report its markers: {exc}",
                            hint="is it a Python 3.9+ interpreter?") from None
    return replace(lock, packages=tuple(lock.applicable(env)))


def validate_install(lock: Lock, venv: str | Path, *, report_dir: str | Path,
                     toolkit_prefix: Path | None = None,
                     allow_no_gpu: bool = False) -> ValidateResult:
    """What ``stacklock install`` runs at its end: every check, the gate
    included, with the report in ``report_dir`` (install's ``--report``, else the
    venv's state folder); the install's ``--toolkit-prefix`` and
    ``--allow-no-gpu`` hold for it too."""
    return validate(lock, venv=venv, report_dir=report_dir,
                    toolkit_prefix=toolkit_prefix, allow_no_gpu=allow_no_gpu,
                    by_markers=False)
