"""Choosing a GPU-architecture variant (:mod:`stacklock.variants`) before resolving.

Every requirement on the generic project is renamed to the variant for the
target's architecture when that variant is on an index with a version the
requirement allows; otherwise the generic project stays. Either way a
:class:`~stacklock.variants.VariantChoice` says why, and the lock records it. A
target with several architectures keeps the generic project: one per-arch build
serves one of them only. The variant comes from the index the generic project is
pinned to, if it is pinned.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

from stacklock.variants import GpuVariants, VariantChoice

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from stacklock.profile import IndexSpec, Profile, RequirementsSpec

__all__ = ["choose_variants", "pin_variants"]

_SHOWN = 6  # versions named in a reason


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
