"""The ``toolkit`` check: the CUDA toolkit the lock names is the one installed.

A runfile toolkit is read at its prefix (``version.json``, ``bin/nvcc``); a
``source = "pypi"`` toolkit is found inside the venv, where the installed wheels'
``RECORD`` says ``bin/nvcc`` went (:mod:`stacklock.cuda.wheels`), and its
``nvcc --version`` is held against the lock: the release against the locked CUDA,
the component version against the locked ``nvidia-cuda-nvcc``. ``--toolkit-prefix``
checks that prefix whatever the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.cuda.catalog import load_catalog
from stacklock.cuda.driver import parse_nvcc_version, parse_version_json
from stacklock.cuda.lock_entry import PYPI_TOOLKIT
from stacklock.cuda.wheels import find_wheel_toolkit
from stacklock.errors import CudaError, RecordError
from stacklock.runner import SubprocessRunner
from stacklock.validate.checks import FAIL, PASS, SKIP, CheckResult

if TYPE_CHECKING:
    from stacklock.cuda.driver import NvccVersion
    from stacklock.lock import CudaEntry, Lock

__all__ = ["check_toolkit", "major_minor", "sites_of"]

NAME = "toolkit"


def major_minor(text: str) -> str | None:
    """``13.0.3`` -> ``13.0``; None for what is not a version."""
    try:
        v = Version(text)
    except InvalidVersion:
        return None
    return f"{v.major}.{v.minor}"


def _run_nvcc(nvcc: Path) -> tuple[NvccVersion | None, str | None]:
    """(parsed ``nvcc --version``, None) or (None, why it could not be read)."""
    if not nvcc.is_file():
        return None, f"{nvcc} is missing"
    rc, out = SubprocessRunner().capture([str(nvcc), "--version"])
    if rc != 0:
        return None, f"{nvcc} --version exited {rc}"
    try:
        return parse_nvcc_version(out), None
    except CudaError as exc:
        return None, f"{nvcc}: {exc}"


def sites_of(dists: dict[str, Any]) -> list[Path]:
    """The site-packages folders the venv's distributions live in."""
    found = {Path(d["dist_info"]).parent for d in dists.get("distributions", [])
             if d.get("dist_info")}
    return sorted(found)


def check_toolkit(lock: Lock | None, *, prefix: Path | None = None,
                  dists: dict[str, Any] | None = None) -> CheckResult:
    """The locked toolkit: at ``prefix`` (``--toolkit-prefix``), in the venv's
    wheels (``source = "pypi"``), or at the lock's runfile prefix."""
    cuda = lock.cuda if lock is not None else None
    want = cuda.version if cuda is not None else None
    if prefix is not None:
        return _check_prefix(prefix, want)
    if cuda is None:
        why = ("no lock given" if lock is None
               else "the lock has no [tool.stacklock.cuda] toolkit")
        return CheckResult(name=NAME, status=SKIP, reason=why)
    if cuda.source == "pypi":
        assert lock is not None
        return _check_wheels(lock, cuda, dists or {})
    if not cuda.prefix:
        return CheckResult(name=NAME, status=FAIL,
                           reason=f"the lock names no prefix for CUDA {want} "
                           f"(source {cuda.source})",
                           notes=("pass --toolkit-prefix PATH",))
    return _check_prefix(Path(cuda.prefix), want)


def _wants_nvcc(cuda: CudaEntry) -> bool:
    for text in cuda.requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == PYPI_TOOLKIT and req.extras & {"nvcc",
                                                                          "all"}:
            return True
    return False


def _installed_version(dists: dict[str, Any], name: str) -> str | None:
    for d in dists.get("distributions", []):
        if canonicalize_name(d["name"]) == name:
            return str(d["version"])
    return None


def _same_release(a: str, b: str) -> bool:
    try:
        return Version(a).release[:3] == Version(b).release[:3]
    except InvalidVersion:
        return False


def _check_wheels(lock: Lock, cuda: CudaEntry, dists: dict[str, Any]) -> CheckResult:
    """A pypi toolkit: the cuda-toolkit wheel at the locked version and, when the
    lock asks for nvcc, an nvcc inside the venv that is the locked one."""
    want = cuda.version
    sites = sites_of(dists)
    looked = ", ".join(str(s) for s in sites) or "the venv (no distributions listed)"
    meta = _installed_version(dists, PYPI_TOOLKIT)
    if meta is not None and not _same_release(meta, want):
        return CheckResult(name=NAME, status=FAIL,
                           reason=f"{PYPI_TOOLKIT} {meta} is installed, the lock "
                           f"says CUDA {want}")
    try:
        major = Version(want).major
    except InvalidVersion:
        major = None
    try:
        kit = find_wheel_toolkit(sites, major=major)
    except RecordError as exc:  # the venv's RECORDs say nothing to trust
        return CheckResult(name=NAME, status=FAIL, reason=exc.message)
    details: dict[str, Any] = {"source": "pypi", "locked": want,
                               "site_packages": [str(s) for s in sites]}
    if kit is not None:
        details.update(kit.to_dict())
    if kit is None or kit.nvcc is None:
        if _wants_nvcc(cuda):
            return CheckResult(name=NAME, status=FAIL, details=details,
                               reason=f"the lock asks for {cuda.requirements[0]}, "
                               f"but no installed wheel put a bin/nvcc in {looked}")
        home = f"; CUDA_HOME {kit.home}" if kit is not None else ""
        return CheckResult(name=NAME, status=PASS, details=details,
                           reason=f"CUDA {want} from wheels ({PYPI_TOOLKIT} "
                           f"{meta or 'not installed'}; no nvcc locked){home}")
    nvcc, why = _run_nvcc(kit.nvcc)
    if nvcc is None:
        return CheckResult(name=NAME, status=FAIL, details=details,
                           reason=f"nvcc from {kit.distribution} {kit.version} "
                           f"does not run: {why}")
    details["nvcc_version"] = nvcc.to_dict()
    if nvcc.release != major_minor(want):
        return CheckResult(name=NAME, status=FAIL, details=details,
                           reason=f"{kit.nvcc} is release {nvcc.release}, the lock "
                           f"says CUDA {want}")
    locked = lock.package(kit.distribution)
    if locked is not None and locked.version is not None \
            and not _same_release(nvcc.version, str(locked.version)):
        return CheckResult(name=NAME, status=FAIL, details=details,
                           reason=f"{kit.nvcc} is nvcc {nvcc.version}, the lock has "
                           f"{kit.distribution} {locked.version}")
    notes = tuple(f"{kit.home / part} is missing ({what})" for part, what in (
        ("include/cuda_runtime.h", "lock the cudart component"),
        ("nvvm/bin/cicc", "nvcc cannot compile device code without nvidia-nvvm"),
    ) if not (kit.home / part).exists())
    return CheckResult(name=NAME, status=PASS, details=details, notes=notes,
                       reason=f"CUDA {want} from wheels: nvcc {nvcc.version} "
                       f"({kit.distribution} {kit.version}) at {kit.nvcc}; "
                       f"CUDA_HOME={kit.home}")


def _check_prefix(where: Path, want: str | None) -> CheckResult:
    """A runfile-style toolkit at ``where``: version.json and bin/nvcc."""
    if not where.is_dir():
        return CheckResult(name=NAME, status=FAIL,
                           reason=f"no toolkit at {where} (locked CUDA {want})")
    details: dict[str, Any] = {"prefix": str(where), "locked": want}
    notes: list[str] = []

    def done(status: str, reason: str) -> CheckResult:
        return CheckResult(name=NAME, status=status, reason=reason,
                           notes=tuple(notes), details=details)

    found: str | None = None
    vj = where / "version.json"
    if vj.is_file():
        try:
            toolkit = parse_version_json(vj.read_bytes())
        except CudaError as exc:
            return CheckResult(name=NAME, status=FAIL, reason=f"{vj}: {exc}")
        found = toolkit.release
        details["version_json"] = toolkit.raw
    else:
        notes.append(f"{vj} is absent (not a runfile install)")
    nvcc, why = _run_nvcc(where / "bin" / "nvcc")
    if nvcc is not None:
        details["nvcc"] = nvcc.to_dict()
    else:
        notes.append(f"{where}/bin/nvcc is missing or does not run")
        if why and "is missing" not in why:
            notes.append(why)
    if found is None and nvcc is None:
        return done(FAIL, f"{where} has neither version.json nor a working nvcc")
    if want is None:
        seen = found or (f"release {nvcc.release}" if nvcc else "")
        return done(PASS, f"toolkit {seen} at {where} (nothing locked)")
    if found is not None and found != want:
        return done(FAIL, f"version.json says {found}, the lock says {want}")
    if nvcc is not None and nvcc.release != major_minor(str(want)):
        return done(FAIL, f"nvcc is release {nvcc.release}, the lock says {want}")
    try:
        expected_nvcc = load_catalog().get(str(want)).nvcc_version
    except CudaError:
        expected_nvcc = None
    if nvcc is not None and expected_nvcc and nvcc.version != expected_nvcc:
        return done(FAIL, f"nvcc {nvcc.version} is not the {expected_nvcc} that "
                          f"ships with CUDA {want}")
    how = "version.json" if found else f"nvcc {nvcc.version if nvcc else ''}"
    return done(PASS, f"CUDA {want} at {where} ({how})")
