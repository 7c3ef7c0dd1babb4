"""GPU-architecture variants: one project per GPU architecture, chosen from
``[target] gpu-arch``.

Some indexes build a project once per GPU architecture under its own name
(flashinfer's cu130 index has ``flashinfer-jit-cache`` and, beside it,
``flashinfer-jit-cache-sm90a``, ``-sm100a``, ``-sm120f``...). A profile declares
which project serves which architecture, as data::

    [gpu-variants.flashinfer-jit-cache]
    sm_90 = "flashinfer-jit-cache-sm90a"
    sm_120 = "flashinfer-jit-cache-sm120f"

This module holds the declaration (:class:`GpuVariants`, read from the profile)
and the choice the lock records (:class:`VariantChoice`); the resolver makes the
choice (:mod:`stacklock.resolve.variant_choice`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from packaging.utils import InvalidName, NormalizedName, canonicalize_name

from stacklock.errors import ProfileError

__all__ = [
    "GpuVariants",
    "VariantChoice",
    "parse_gpu_variants",
]

_ARCH_RE = re.compile(r"^sm_\d+[a-z]?$")


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
