"""Stack coherence: do the GPU wheels of one lock and its toolkit agree on CUDA?

A wheel says which CUDA it targets in three ways, most specific first:

1. its local version label: ``torch-2.11.0+cu130`` -> 13.0 (``+cu12`` -> 12);
2. its Requires-Dist: ``cuda-toolkit[...]==13.0.2`` -> 13.0,
   ``nvidia-cuda-runtime-cu12==12.8.90`` -> 12.8, any ``nvidia-*-cu13`` -> 13;
3. the index it comes from (``.../whl/cu130/...``) - used only for wheels that are
   platform-specific, since CUDA indexes also serve pure-Python packages.

Wheels for two CUDA majors cannot share a process (each loads its own libcudart
major), so that is an error naming them. A toolkit of another major than the wheels
is an error too; a wheel that targets a newer minor than the toolkit is a warning
(minor-version compatibility covers running it, not compiling against it).

A profile that declares no ``[cuda]`` toolkit asked for no CUDA guarantee: there a
mix is reported as a warning (and recorded in the lock), not refused, so every set
``uv pip compile`` locks gets a lock.

A library carrier that requires its CUDA 12 libraries always and their CUDA 13 twin
through an extra (``nvidia-cutlass-dsl`` -> ``nvidia-cutlass-dsl-libs-cu12``, and
``-cu13`` with ``[cu13]``) carries both when the lock holds the twin: such a
requirement is recognised as "carried" (a finding, never evidence), with no
allowance needed.

The other exception is reviewed and explicit: the profile's ``[cuda] allow-mixed``
names packages (``nvidia-cutlass-dsl-libs-cu12``) that are set aside - a requirement
on one, or the package itself, neither labels a wheel nor mixes the stack, and each
is reported as an "allowed" finding. It exists for library carriers: a package
that always requires its CUDA 12 libraries, even where an extra adds the CUDA 13
twin. That is never assumed: the error only suggests it, naming the requiring
package and, when present, the twin.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from stacklock.errors import CudaError, CudaMixError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "CoherenceFinding",
    "CudaTarget",
    "PackageInfo",
    "carried_twins",
    "check_coherence",
    "render_coherence",
    "wheel_cuda",
]

_LABEL_RE = re.compile(r"^cu(\d{2,3})(?![\d])")
_INDEX_RE = re.compile(r"/cu(\d{3})(?=/|$)")
_SUFFIX_RE = re.compile(r"^nvidia-.+-cu(\d{2})$")
# packages whose version follows the toolkit's (13.0.96 belongs to CUDA 13.0)
_TOOLKIT_VERSIONED = {
    "cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cuda-cupti",
    "nvidia-cuda-nvcc", "nvidia-nvjitlink",
}
_EXACT_OPS = ("==", "===", "~=")


@dataclass(frozen=True, kw_only=True)
class PackageInfo:
    """What coherence needs to know of one locked package."""

    name: str
    version: str
    filename: str | None = None
    index_url: str | None = None
    requires_dist: tuple[str, ...] = ()
    # the projects the lock gives it, those of its requested extras included
    dependencies: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.filename or f"{self.name}=={self.version}"


@dataclass(frozen=True, kw_only=True)
class CudaTarget:
    cuda: str        # "13.0", or "13" when only the major is known
    evidence: str    # why, e.g. "+cu130 label"
    requirement: str | None = None  # the required project that said so, if one did

    @property
    def major(self) -> int:
        return int(self.cuda.split(".")[0])

    def to_dict(self) -> dict[str, str]:
        return {"cuda": self.cuda, "evidence": self.evidence}


@dataclass(frozen=True, kw_only=True)
class CoherenceFinding:
    package: str
    filename: str | None
    cuda: str
    evidence: str
    level: str  # "ok", "warning", "carried" (beside its twin) or "allowed"
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"package": self.package, "filename": self.filename, "cuda": self.cuda,
                "evidence": self.evidence, "level": self.level, "message": self.message}


def _from_cu_digits(digits: str) -> str:
    # cu130 -> 13.0, cu128 -> 12.8, cu118 -> 11.8; cu12 / cu13 -> major only
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) == 3 else digits


def _from_label(version: str) -> str | None:
    try:
        local = Version(version).local
    except InvalidVersion:
        return None
    m = _LABEL_RE.match(local or "")
    return _from_cu_digits(m.group(1)) if m else None


def _exact_version(req: Requirement) -> Version | None:
    for spec in req.specifier:
        if spec.operator in _EXACT_OPS:
            try:
                return Version(spec.version.removesuffix(".*"))
            except InvalidVersion:
                return None
    return None


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Requirement | None:
    """``text`` as a requirement, None when it is not one. Parsed once: a
    resolution's coherence check reads each package's requirements three times
    (its own findings, the wheel's label, the twins it carries)."""
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _from_requirement(text: str) -> tuple[str, str] | None:
    """(CUDA, required project) for a requirement that names a CUDA."""
    req = _parsed(text)
    if req is None:
        return None
    if req.marker is not None and "extra" in str(req.marker):
        return None  # optional dependency: not what the wheel needs
    name = canonicalize_name(req.name)
    suffix = _SUFFIX_RE.match(name)
    base = name[: -len("-cu12")] if suffix else name
    exact = _exact_version(req)
    if base in _TOOLKIT_VERSIONED and exact is not None:
        return f"{exact.major}.{exact.minor}", name
    if suffix:
        return suffix.group(1), name
    return None


def _cuda_requirements(pkg: PackageInfo) -> list[tuple[str, str, str]]:
    """(CUDA, required project, requirement text) for each requirement naming one."""
    out = []
    for text in pkg.requires_dist:
        found = _from_requirement(text)
        if found:
            out.append((*found, text.split(";")[0].strip()))
    return out


def _platform_specific(filename: str | None) -> bool:
    if not filename or not filename.endswith(".whl"):
        return False
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return False
    return any(tag.platform != "any" for tag in tags)


def carried_twins(pkg: PackageInfo, present: Collection[str]) -> dict[str, str]:
    """{required ``nvidia-*-cuNN`` project: its twin} for each CUDA library ``pkg``
    requires whose twin of another major ``pkg`` also names (a dependency the
    lock gives it, or a requirement under any marker, an extra's included) and
    the lock holds: the package carries both."""
    named = {str(canonicalize_name(n)) for n in pkg.dependencies}
    for text in pkg.requires_dist:
        req = _parsed(text)
        if req is not None:
            named.add(canonicalize_name(req.name))
    out = {}
    for _, name, _ in _cuda_requirements(pkg):
        if not _SUFFIX_RE.match(name):
            continue
        twins = sorted(n for n in named & set(present)
                       if n != name and _SUFFIX_RE.match(n) and n[:-2] == name[:-2])
        if twins:
            out[name] = twins[0]
    return out


def wheel_cuda(pkg: PackageInfo, *, allow_mixed: Iterable[str] = (),
               present: Collection[str] = ()) -> CudaTarget | None:
    """The CUDA this package targets, or None for a package that names none.
    Requirements on ``allow_mixed`` projects, and those carried beside a twin
    among ``present`` (the lock's project names), are not evidence."""
    label = _from_label(pkg.version)
    if label:
        return CudaTarget(cuda=label, evidence=f"+cu{label.replace('.', '')} label")
    set_aside = {str(canonicalize_name(n)) for n in allow_mixed}
    set_aside |= set(carried_twins(pkg, present))
    found = [f for f in _cuda_requirements(pkg) if f[1] not in set_aside]
    if found:
        majors = {c.split(".")[0] for c, _, _ in found}
        if len(majors) > 1:
            raise CudaMixError(
                f"{pkg.label} requires CUDA packages of two majors: "
                + ", ".join(f"{why} (CUDA {c})" for c, _, why in found),
                wheels={int(m): [pkg.label] for m in majors},
                hint="this wheel's metadata is inconsistent; pin another version, "
                     "or list the one only carried along in [cuda] allow-mixed")
        cuda, name, why = max(found, key=lambda item: len(item[0]))
        return CudaTarget(cuda=cuda, evidence=f"Requires-Dist {why}",
                          requirement=name)
    if pkg.index_url and _platform_specific(pkg.filename):
        m = _INDEX_RE.search(pkg.index_url.rstrip("/"))
        if m:
            return CudaTarget(cuda=_from_cu_digits(m.group(1)),
                              evidence=f"index .../cu{m.group(1)}")
    return None


def _toolkit(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        raise CudaError(f"toolkit {version!r} is not a version",
                        hint='write it as "13.0.1"') from None


def check_coherence(packages: Iterable[PackageInfo], cuda_version: str | None,
                    *, allow_mixed: Iterable[str] = ()) -> list[CoherenceFinding]:
    """One finding per package that targets a CUDA; with a toolkit
    (``cuda_version``) raises CudaMixError when the wheels target two CUDA majors
    or the toolkit is of another major; without one, a mix is a warning.
    ``allow_mixed`` (the profile's ``[cuda] allow-mixed``) names projects set aside:
    reported as "allowed" findings, never counted as a mix."""
    pkgs = list(packages)
    allowed = sorted({canonicalize_name(n) for n in allow_mixed})
    present = {str(canonicalize_name(p.name)) for p in pkgs}
    targets, inconsistent = [], []
    for pkg in pkgs:
        try:
            found = wheel_cuda(pkg, allow_mixed=allowed, present=present)
        except CudaMixError as exc:  # one wheel naming two majors
            if cuda_version:
                raise
            inconsistent.append(CoherenceFinding(
                package=pkg.name, filename=pkg.filename, evidence="Requires-Dist",
                cuda=" ".join(map(str, sorted(exc.wheels))), level="warning",
                message=f"{exc.message}; not refused because the profile declares "
                        "no [cuda] toolkit"))
            continue
        if found is not None:
            targets.append((pkg, found))
    counted = [(p, t) for p, t in targets if canonicalize_name(p.name) not in allowed]
    by_major: dict[int, list[tuple[PackageInfo, CudaTarget]]] = {}
    for pkg, target in counted:
        by_major.setdefault(target.major, []).append((pkg, target))
    toolkit = _toolkit(cuda_version) if cuda_version else None
    mixed = ""
    if len(by_major) > 1 and toolkit is None:  # no CUDA promised: say it, lock it
        mixed = (f"; the lock mixes CUDA {' and '.join(map(str, sorted(by_major)))} "
                 "wheels, not refused because the profile declares no [cuda] "
                 "toolkit (declare one to have the mix refused)")
    elif len(by_major) > 1:
        parts = "; ".join(f"CUDA {major}: " + ", ".join(_named(p, t) for p, t in pt)
                          for major, pt in sorted(by_major.items()))
        raise CudaMixError(
            f"wheels for {len(by_major)} CUDA majors in one lock - {parts}",
            wheels={m: [p.label for p, _ in pt] for m, pt in by_major.items()},
            hint=_mix_hint(by_major, toolkit, {canonicalize_name(p.name)
                                               for p in pkgs}))
    if toolkit is not None and by_major and toolkit.major not in by_major:
        (major, pt), = by_major.items()
        raise CudaMixError(
            f"toolkit {cuda_version} is CUDA {toolkit.major}, but the wheels target "
            f"CUDA {major}: " + ", ".join(_named(p, t) for p, t in pt),
            wheels={major: [p.label for p, _ in pt], toolkit.major: []},
            hint=f"set [cuda] toolkit to a {major}.x release, or take wheels built "
                 f"for CUDA {toolkit.major}")
    findings = []
    for pkg, target in targets:
        level, message = "ok", f"targets CUDA {target.cuda} ({target.evidence})"
        if canonicalize_name(pkg.name) in allowed:
            level, message = "allowed", f"{message}, allowed by [cuda] allow-mixed"
        elif mixed:
            level, message = "warning", message + mixed
        elif toolkit is not None and "." in target.cuda:
            wheel = Version(target.cuda)
            if (wheel.major, wheel.minor) > (toolkit.major, toolkit.minor):
                level = "warning"
                message += (f", newer than toolkit {cuda_version}: what it compiles "
                            "at run time is built with the older toolkit")
        findings.append(CoherenceFinding(
            package=pkg.name, filename=pkg.filename, cuda=target.cuda,
            evidence=target.evidence, level=level, message=message))
    return (findings + inconsistent + _allowed_findings(pkgs, allowed)
            + _carried_findings(pkgs, allowed, present))


def _named(pkg: PackageInfo, target: CudaTarget) -> str:
    return f"{pkg.label} (CUDA {target.cuda}, {target.evidence})"


def _allowed_findings(pkgs: Sequence[PackageInfo], allowed: Sequence[str]
                      ) -> list[CoherenceFinding]:
    """An "allowed" finding per requirement set aside by ``allowed``, and a
    warning per allowed project that nothing in the stack is or requires."""
    findings = []
    used = {str(canonicalize_name(p.name)) for p in pkgs} & set(allowed)
    for pkg in pkgs:
        for cuda, name, why in _cuda_requirements(pkg):
            if name not in allowed:
                continue
            used.add(name)
            findings.append(CoherenceFinding(
                package=pkg.name, filename=pkg.filename, cuda=cuda,
                evidence=f"Requires-Dist {why}", level="allowed",
                message=f"requires {why} (CUDA {cuda}), allowed by [cuda] "
                        "allow-mixed"))
    for name in allowed:
        if name not in used:
            findings.append(CoherenceFinding(
                package=name, filename=None, cuda="", evidence="[cuda] allow-mixed",
                level="warning",
                message="named in [cuda] allow-mixed, but no package of the stack "
                        "is or requires it: remove it from the profile"))
    return findings


def _carried_findings(pkgs: Sequence[PackageInfo], allowed: Sequence[str],
                      present: Collection[str]) -> list[CoherenceFinding]:
    """A "carried" finding per CUDA library required beside its twin (one that
    ``[cuda] allow-mixed`` names is reported as allowed instead)."""
    findings = []
    for pkg in pkgs:
        carried = carried_twins(pkg, present)
        for cuda, name, why in _cuda_requirements(pkg):
            if name in carried and name not in allowed:
                findings.append(CoherenceFinding(
                    package=pkg.name, filename=pkg.filename, cuda=cuda,
                    evidence=f"Requires-Dist {why}", level="carried",
                    message=f"requires {why} (CUDA {cuda}), carried along beside "
                            f"its twin {carried[name]}, which the lock holds too: "
                            "not counted as a CUDA target"))
    return findings


def _mix_hint(by_major: dict[int, list[tuple[PackageInfo, CudaTarget]]],
              toolkit: Version | None, names: set[str]) -> str:
    """What to try; names the CUDA libraries that only their requirer brings in
    (``nvidia-*-cuNN`` requirements), with the twin of the other major when the
    stack has it - the case ``[cuda] allow-mixed`` is for."""
    largest = max(len(pt) for pt in by_major.values())
    wrong = [m for m in sorted(by_major)
             if (m != toolkit.major if toolkit is not None
                 else len(by_major[m]) < largest)] or sorted(by_major)
    carried: dict[str, list[str]] = {}
    for major in wrong:
        for pkg, target in by_major[major]:
            name = target.requirement
            if name is None or not _SUFFIX_RE.match(name):
                continue
            twins = [f"{name[:-2]}{other}" for other in by_major if other != major]
            twin = next((t for t in twins if t in names), None)
            carried.setdefault(name, []).append(
                f"required by {pkg.name}" + (f" next to its twin {twin}" if twin
                                             else ""))
    advice = ("take every GPU wheel from indexes of one CUDA major "
              "(e.g. all cu130 or all cu128)")
    if not carried:
        return (advice + "; a CUDA library only carried along can be listed, "
                "after review, in [cuda] allow-mixed")
    listed = ", ".join(f'"{n}"' for n in sorted(carried))
    why = "; ".join(f"{n} is {', '.join(sorted(set(r)))}"
                    for n, r in sorted(carried.items()))
    return (f"{advice}; or, if {why} and is only carried along, review it and set "
            f"[cuda] allow-mixed = [{listed}]")


def render_coherence(findings: Sequence[CoherenceFinding]) -> str:
    if not findings:
        return "no package names a CUDA version"
    return "\n".join(f"{f.level:<7} {f.filename or f.package}: {f.message}"
                     for f in findings)
