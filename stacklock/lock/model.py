"""The lock in memory: packaging's validated PEP 751 model plus stacklock's tables.

``packaging.pylock`` owns everything PEP 751 defines (its ``Package``,
``PackageWheel``, ... are used as they are); :class:`LockedPackage` adds the typed
``[packages.tool.stacklock]`` table and :class:`Lock` the typed ``[tool.stacklock]``
(:class:`~stacklock.lock.tables.StackInfo` for a lock ``stacklock resolve`` wrote,
:class:`~stacklock.lock.tables.SnapshotInfo` for a snapshot, neither for a lock
another tool wrote). Every verb reads a lock into this once and passes it on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename

from stacklock.lock.tables import PackageTool

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from packaging.markers import Marker
    from packaging.pylock import (
        Package,
        PackageArchive,
        PackageDirectory,
        PackageSdist,
        PackageVcs,
        PackageWheel,
        Pylock,
    )
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.tags import Tag
    from packaging.version import Version

    from stacklock.lock.tables import CudaEntry, SnapshotInfo, StackInfo
    from stacklock.target import Target

__all__ = ["Lock", "LockedPackage", "wheel_sha256", "wheel_tags"]


def wheel_sha256(wheel: PackageWheel | PackageSdist | PackageArchive) -> str | None:
    """The wheel's (or sdist's) sha256 (lower case), None when the lock records
    another hash."""
    sha = wheel.hashes.get("sha256")
    return sha.lower() if sha else None


def wheel_tags(wheel: PackageWheel) -> frozenset[Tag]:
    """The tags in the wheel's filename (``name``, else the end of its url/path)."""
    return parse_wheel_filename(wheel.filename)[3]


@dataclass(frozen=True, kw_only=True)
class LockedPackage:
    """One ``[[packages]]`` entry: ``entry`` as packaging validated it, ``tool``
    its ``[packages.tool.stacklock]``."""

    entry: Package
    tool: PackageTool = field(default_factory=PackageTool)

    @property
    def name(self) -> NormalizedName:
        return self.entry.name

    @property
    def version(self) -> Version | None:
        return self.entry.version

    @property
    def marker(self) -> Marker | None:
        return self.entry.marker

    @property
    def wheels(self) -> tuple[PackageWheel, ...]:
        return tuple(self.entry.wheels or ())

    @property
    def sdist(self) -> PackageSdist | None:
        """The sdist install builds: locked where no wheel fits the target."""
        return self.entry.sdist if not self.entry.wheels else None

    @property
    def files(self) -> tuple[PackageWheel | PackageSdist, ...]:
        """What install may fetch: the wheels, or the sdist it builds."""
        return (self.sdist,) if self.sdist is not None else self.wheels

    @property
    def all_files(self) -> tuple[PackageWheel | PackageSdist, ...]:
        """Every hashed file of the entry: its wheels and its sdist (another
        tool locks both; uv picks one for the target)."""
        sdist = (self.entry.sdist,) if self.entry.sdist is not None else ()
        return self.wheels + sdist

    @property
    def source(self) -> PackageVcs | PackageDirectory | PackageArchive | None:
        """The entry's PEP 751 ``vcs``, ``directory`` or ``archive``, if any: a
        source that is neither a wheel nor an sdist of an index."""
        return self.entry.vcs or self.entry.directory or self.entry.archive

    @property
    def cuda(self) -> str | None:
        return self.tool.cuda

    @property
    def dependencies(self) -> tuple[str, ...]:
        return tuple(str(d.get("name", "")) for d in self.entry.dependencies or ())


@dataclass(frozen=True, kw_only=True)
class Lock:
    """A whole PEP 751 file. ``path`` is where it was read from (or will be
    written); ``source`` the profile it was resolved from, for the header."""

    path: str
    lock_version: Version
    environments: tuple[Marker, ...]
    requires_python: SpecifierSet | None
    created_by: str
    packages: tuple[LockedPackage, ...]
    stack: StackInfo | None = None
    snapshot: SnapshotInfo | None = None
    source: str = ""
    extras: tuple[str, ...] = ()
    dependency_groups: tuple[str, ...] = ()
    default_groups: tuple[str, ...] = ()

    def applicable(self, env: Mapping[str, str], *, extras: Collection[str] = (),
                   groups: Collection[str] | None = None) -> list[LockedPackage]:
        """The packages whose marker holds in ``env``: PEP 751 markers see
        ``extras`` and ``dependency_groups`` (the lock's ``default-groups``
        unless ``groups`` names others), as ``Pylock.select()`` evaluates them."""
        lock_env: dict[str, str | frozenset[str]] = {
            **env, "extras": frozenset(canonicalize_name(e) for e in extras),
            "dependency_groups": frozenset(self.default_groups if groups is None
                                           else groups)}
        return [p for p in self.packages
                if p.marker is None or p.marker.evaluate(lock_env, "lock_file")]

    def to_pylock(self) -> Pylock:
        """The PEP 751 part as packaging models it, for ``Pylock.select()``
        (each package the very ``entry`` of :attr:`packages`)."""
        from packaging.pylock import Pylock

        return Pylock(
            lock_version=self.lock_version,
            environments=list(self.environments) or None,
            requires_python=self.requires_python,
            extras=[canonicalize_name(e) for e in self.extras],
            dependency_groups=list(self.dependency_groups),
            default_groups=list(self.default_groups),
            created_by=self.created_by,
            packages=[p.entry for p in self.packages])

    @cached_property
    def by_name(self) -> Mapping[NormalizedName, LockedPackage]:
        """Packages by name (the last of a name listed twice under markers)."""
        return {p.name: p for p in self.packages}

    def package(self, name: str) -> LockedPackage | None:
        return self.by_name.get(canonicalize_name(name))

    @property
    def profile(self) -> str | None:
        return self.stack.profile if self.stack is not None else None

    @property
    def target(self) -> Target | None:
        return self.stack.target if self.stack is not None else None

    @property
    def cuda(self) -> CudaEntry | None:
        return self.stack.cuda if self.stack is not None else None

    @property
    def overrides(self) -> tuple[Requirement, ...]:
        """The overrides in force on the lock's target (those whose marker is
        false there are recorded, and ignored)."""
        if self.stack is None:
            return ()
        ignored = {str(r) for r in self.stack.overrides_ignored}
        return tuple(r for r in self.stack.overrides if str(r) not in ignored)

    @property
    def validate(self) -> Mapping[str, object]:
        """``[tool.stacklock.validate]`` as written; stacklock.validate parses it."""
        table = self.stack.validate if self.stack is not None else None
        return table if table is not None else {}
