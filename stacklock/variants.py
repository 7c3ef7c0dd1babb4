"""GPU-architecture variants: one project per GPU architecture, chosen from
``[target] gpu-arch``.

Some indexes build a project once per GPU architecture under its own name
(flashinfer's cu130 index has ``flashinfer-jit-cache`` and, beside it,
``flashinfer-jit-cache-sm90a``, ``-sm100a``, ``-sm120f``...). A profile declares
which project serves which architecture, as data::

    [gpu-variants.flashinfer-jit-cache]
    sm_90 = "flashinfer-jit-cache-sm90a"
    sm_120 = "flashinfer-jit-cache-sm120f"

Before resolving, every requirement on the generic project is renamed to the
variant for the target's architecture when that variant is on an index with a
version the requirement allows; otherwise the generic project stays. Either
way a :class:`VariantChoice` says why, and the lock records it. A target with
several architectures keeps the generic project: one per-arch build serves
one of them only. The variant comes from the index the generic project is
pinned to, if it is pinned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement
from packaging.utils import InvalidName, NormalizedName, canonicalize_name

from stacklock.errors import ProfileError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from stacklock.profile import IndexSpec, Profile, RequirementsSpec

__all__ = [
    "GpuVariants",
    "VariantChoice",
    "choose_variants",
    "parse_gpu_variants",
    "pin_variants",
]

_ARCH_RE = re.compile(r"^sm_\d+[a-z]?$")
_SHOWN = 6  # versions named in a reason


@dataclass(frozen=True, kw_only=True)
class GpuVariants:
    """``[gpu-variants.<project>]``: the per-architecture projects of one
    generic project, keyed by compute capability (``sm_120``)."""

    project: NormalizedName
    by_arch: tuple[tuple[str, NormalizedName], ...]

    def for_arch(self, arch: str) -> NormalizedName | None:
        return next((p for a, p in self.by_arch if a == arch), None)

    def to_dict(self) -> dict[str, str]:
        return dict(self.by_arch)


@dataclass(frozen=True, kw_only=True)
class VariantChoice:
    """Which project serves a generic one for this target, and why."""

    project: NormalizedName
    gpu_arch: tuple[str, ...]
    chosen: NormalizedName
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"project": self.project, "gpu-arch": list(self.gpu_arch),
                "chosen": self.chosen, "reason": self.reason}


def _name(text: Any, key: str, path: str | None) -> NormalizedName:
    if not isinstance(text, str):
        raise ProfileError(f"expected a project name, got {text!r}", path=path,
                           key=key)
    try:
        return canonicalize_name(text, validate=True)
    except InvalidName:
        raise ProfileError(f"{text!r} is not a project name", path=path,
                           key=key) from None


def parse_gpu_variants(raw: Any, path: str | None) -> tuple[GpuVariants, ...]:
    """The ``[gpu-variants]`` table of a profile (absent: none)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ProfileError("expected a table [gpu-variants.<project>]", path=path,
                           key="gpu-variants")
    out = []
    for project, table in raw.items():
        key = f"gpu-variants.{project}"
        generic = _name(project, key, path)
        if not isinstance(table, dict) or not table:
            raise ProfileError("expected a table of gpu-arch = project name",
                               path=path, key=key,
                               hint='e.g. sm_120 = "flashinfer-jit-cache-sm120f"')
        pairs = []
        for arch, variant in table.items():
            if not _ARCH_RE.match(arch):
                raise ProfileError(
                    f"{arch!r} is not a compute capability like 'sm_120'",
                    path=path, key=f"{key}.{arch}")
            name = _name(variant, f"{key}.{arch}", path)
            if name == generic:
                raise ProfileError(f"{variant!r} is the generic project itself",
                                   path=path, key=f"{key}.{arch}")
            pairs.append((arch, name))
        out.append(GpuVariants(project=generic, by_arch=tuple(sorted(pairs))))
    return tuple(out)


def pin_variants(profile: Profile) -> Profile:
    """The profile with each declared variant pinned to the index its generic
    project is pinned to (unless the profile pins the variant itself)."""
    pinned = {p for i in profile.indexes for p in i.packages}
    indexes: list[IndexSpec] = []
    for index in profile.indexes:
        extra = [v for decl in profile.gpu_variants if decl.project in index.packages
                 for _, v in decl.by_arch if v not in pinned]
        if extra:
            index = replace(index, packages=(*index.packages,
                                             *dict.fromkeys(extra)))
        indexes.append(index)
    return replace(profile, indexes=tuple(indexes))


def choose_variants(
    spec: RequirementsSpec,
    declared: Sequence[GpuVariants],
    gpu_arch: Sequence[str],
    finder: Any,
) -> tuple[RequirementsSpec, tuple[VariantChoice, ...]]:
    """``spec`` with the generic projects renamed to their variant where one
    fits (``finder`` is a :class:`stacklock.index.finder.Finder`), and the
    choice made for every declared project the profile asks for."""
    asked = {canonicalize_name(r.name): r for r in spec.packages}
    renames: dict[NormalizedName, NormalizedName] = {}
    choices = []
    for decl in declared:
        req = asked.get(decl.project)
        if req is None:
            continue  # the generic project is not a requirement here
        chosen, reason = _choose(decl, req, tuple(gpu_arch), spec, finder)
        if chosen != decl.project:
            renames[decl.project] = chosen
        choices.append(VariantChoice(project=decl.project, gpu_arch=tuple(gpu_arch),
                                     chosen=chosen, reason=reason))
    if not renames:
        return spec, tuple(choices)
    return replace(
        spec,
        packages=_renamed(spec.packages, renames),
        overrides=_renamed(spec.overrides, renames),
        constraints=_renamed(spec.constraints, renames),
        prereleases=frozenset(renames.get(n, n) for n in spec.prereleases),
    ), tuple(choices)


def _choose(decl: GpuVariants, req: Requirement, gpu_arch: tuple[str, ...],
            spec: RequirementsSpec, finder: Any) -> tuple[NormalizedName, str]:
    generic = decl.project
    if len(gpu_arch) != 1:
        archs = ", ".join(gpu_arch) or "none"
        return generic, (f"target gpu-arch is {archs}: a per-arch build serves one "
                         f"architecture, so the generic {generic} serves them all")
    (arch,) = gpu_arch
    variant = decl.for_arch(arch)
    if variant is None:
        return generic, f"no variant of {generic} is declared for {arch}"
    index = finder.index_for(variant)
    if index is None:
        return generic, f"{variant} (for {arch}) is on no index of the profile"
    allow = variant in spec.prereleases or generic in spec.prereleases or None
    versions = [ev.version for ev in finder.find_candidates(variant)]
    fitting = [v for v in versions
               if req.specifier.contains(v, prereleases=allow)]
    where = f"{variant} on index {index.name!r}"
    if fitting:
        return variant, (f"target gpu-arch {arch}: {where} has {max(fitting)} "
                         f"for {_text(req)}")
    offered = ", ".join(str(v) for v in sorted(set(versions))[-_SHOWN:]) or "nothing"
    return generic, (f"{where} has no version for {_text(req)} (it has "
                     f"{offered}), so the generic {generic} is used")


def _text(req: Requirement) -> str:
    return f"{canonicalize_name(req.name)}{req.specifier or ''}"


def _renamed(reqs: Iterable[Requirement],
             renames: dict[NormalizedName, NormalizedName]) -> tuple[Requirement, ...]:
    out = []
    for req in reqs:
        new = renames.get(canonicalize_name(req.name))
        if new is not None:
            req = Requirement(str(req).replace(req.name, new, 1))
        out.append(req)
    return tuple(out)
