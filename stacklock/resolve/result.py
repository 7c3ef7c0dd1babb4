"""What a resolution produces: one :class:`ResolvedPackage` per project and the
:class:`Resolution` around them, from which :mod:`stacklock.resolve.lockfile`
makes the lock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stacklock.resolve.source import SourceStats

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.utils import NormalizedName
    from packaging.version import Version

    from stacklock.cuda.coherence import CoherenceFinding
    from stacklock.lock.tables import AppliedOverride
    from stacklock.profile import Profile
    from stacklock.resolve.hashes import LockedWheel
    from stacklock.variants import VariantChoice

__all__ = ["Resolution", "ResolvedPackage"]


@dataclass(frozen=True, kw_only=True)
class ResolvedPackage:
    name: NormalizedName
    version: Version
    index_name: str
    index_url: str  # credentials stripped
    dependencies: tuple[NormalizedName, ...]
    wheel: LockedWheel
    requires_dist: tuple[str, ...] = ()
    cuda: str | None = None
    build: str | None = None  # why it is built from its sdist on install
    metadata: str | None = None  # an sdist's: how its metadata was had
    match_runtime: tuple[str, ...] = ()  # an sdist's: runtime its builds get

    @property
    def is_sdist(self) -> bool:
        return not self.wheel.filename.endswith(".whl")


@dataclass(frozen=True, kw_only=True)
class Resolution:
    profile: Profile
    packages: tuple[ResolvedPackage, ...]
    overrides: tuple[AppliedOverride, ...] = ()
    cuda_entry: dict[str, Any] | None = None
    coherence: tuple[CoherenceFinding, ...] = ()
    variants: tuple[VariantChoice, ...] = ()
    seconds: float = 0.0
    stats: SourceStats = field(default_factory=SourceStats)
    # URL -> sha256 of each index page read (None: the index had none), for
    # stacklock.resolve.memo
    pages_read: Mapping[str, str | None] = field(default_factory=dict)

    def pins(self) -> dict[str, str]:
        return {p.name: str(p.version) for p in self.packages}
