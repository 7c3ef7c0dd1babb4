"""What a resolution produces: one :class:`ResolvedPackage` per project and the
:class:`Resolution` around them, from which :mod:`stacklock.resolve.lockfile`
makes the lock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from stacklock.resolve.source import SourceStats

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from packaging.utils import NormalizedName
    from packaging.version import Version

    from stacklock.cuda.coherence import CoherenceFinding
    from stacklock.lock.tables import AppliedOverride, PatchRecord
    from stacklock.profile import Profile
    from stacklock.resolve.direct import DirectArtifact
    from stacklock.resolve.hashes import LockedWheel
    from stacklock.variants import VariantChoice

__all__ = ["Gate", "PassedOver", "Resolution", "ResolvedPackage"]


@dataclass(frozen=True, kw_only=True)
class PassedOver:
    """A candidate the resolution dropped because the native check found that it
    would not load beside the rest (``reason``: the first finding, one line), or
    a provider moved so that a consumer loads (``moved``)."""

    name: NormalizedName
    version: Version
    reason: str
    findings: tuple[Any, ...] = field(default=(), compare=False)  # the check's
    # a provider moved for a consumer's sake (torch for torchao), not a
    # candidate that would not load itself (stacklock.resolve.moves)
    moved: bool = False
    # the existing lock's entry, kept with the pins it explains (not judged
    # again: the resolution tried the locked versions first)
    kept: bool = False


class Gate(Protocol):
    """A judge of complete candidate sets (the native check): it returns the
    candidates to pass over. ``pinned`` is told of each candidate the
    resolver pins, with the wheel the lock would record, so that the gate can
    start its work before the set is complete."""

    def __call__(self, packages: Sequence[ResolvedPackage]) -> Sequence[PassedOver]:
        ...

    def pinned(self, name: NormalizedName, version: Version,
               wheel: LockedWheel) -> None:
        ...

    def lacks(self, consumer: NormalizedName, provider: NormalizedName,
              version: Version, wheel: LockedWheel) -> frozenset[str]:
        """The symbols ``consumer`` (as last judged) needs of ``provider``'s
        families that ``provider`` ``version``, its file ``wheel``, lacks."""
        ...

    def accept_warnings(self) -> bool:
        """Stop passing over candidates for warnings alone (findings in modules
        no import loads); whether that changes anything."""
        ...


@dataclass(frozen=True, kw_only=True)
class ResolvedPackage:
    name: NormalizedName
    version: Version
    index_name: str
    index_url: str  # credentials stripped
    dependencies: tuple[NormalizedName, ...]
    wheel: LockedWheel | None  # None: a direct reference to a repository or folder
    requires_dist: tuple[str, ...] = ()
    cuda: str | None = None
    build: str | None = None  # why it is built from its sdist on install
    # the yank reason ("" for none) of a yanked file the profile pins exactly
    yanked: str | None = None
    direct: DirectArtifact | None = None  # a direct reference of the profile
    metadata: str | None = None  # an sdist's: how its metadata was had
    match_runtime: tuple[str, ...] = ()  # an sdist's: runtime its builds get
    patches: tuple[PatchRecord, ...] = ()  # the profile's [[patches]] of it, applied

    @property
    def is_sdist(self) -> bool:
        """Whether install builds it: an sdist, a repository or a folder."""
        return self.wheel is None or not self.wheel.filename.endswith(".whl")


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
    warnings: tuple[str, ...] = ()  # what the lock honours differently than asked
    passed_over: tuple[PassedOver, ...] = ()  # dropped by the native check
    # the native check's warnings: {package, version, module, reason}, a module
    # no import of its package loads that would not load
    native_warnings: tuple[Mapping[str, str], ...] = ()

    def pins(self) -> dict[str, str]:
        return {p.name: str(p.version) for p in self.packages}
