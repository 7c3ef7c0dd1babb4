"""The requirements of a locked entry, read from its own wheel's METADATA.

A wheel named by ``path`` (a pack's, a local one) is read from disk; any other
through :class:`~stacklock.metadata.fetch.MetadataFetcher` (its cache first, the
artifact store, PEP 658, range reads): a lock resolved on this machine costs no
request. Markers are evaluated for the lock's target (the running interpreter
for a lock without one, such as uv's), without extras.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from stacklock.errors import MetadataError
from stacklock.index.links import Link
from stacklock.metadata import remote_zip
from stacklock.metadata.parse import parse_metadata

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from stacklock.lock import Lock, LockedPackage
    from stacklock.metadata.fetch import MetadataFetcher
    from stacklock.target import Target

__all__ = ["RequirementReader", "Requirements"]


class Requirements(Protocol):
    def __call__(self, package: LockedPackage,
                 extras: frozenset[str] = frozenset()) -> tuple[Requirement, ...]:
        """The requirements of ``package`` (with ``extras``) on the target."""
        ...


class RequirementReader:
    """``reader(package, extras)``: the requirements of a locked package (with
    those extras asked for) that apply on ``lock``'s target; each wheel's
    METADATA is read once."""

    def __init__(self, fetcher: MetadataFetcher | None, lock: Lock, *,
                 target: Target | None = None) -> None:
        self._fetcher = fetcher
        target = target or lock.target
        self._env: dict[str, str] = (
            target.marker_environment() if target is not None else {})
        self._memo: dict[tuple[str, str], tuple[Requirement, ...]] = {}

    def __call__(self, package: LockedPackage,
                 extras: frozenset[str] = frozenset()) -> tuple[Requirement, ...]:
        key = (package.name, str(package.version))
        if key not in self._memo:
            self._memo[key] = self._read(package)
        wanted = ("", *sorted(extras))
        return tuple(r for r in self._memo[key] if r.marker is None or any(
            r.marker.evaluate({**self._env, "extra": e}) for e in wanted))

    def _read(self, package: LockedPackage) -> tuple[Requirement, ...]:
        if not package.wheels:
            return ()  # an sdist, a directory, a vcs checkout: nothing to read
        wheel = package.wheels[0]
        filename = wheel.filename
        if wheel.path:
            return _from_file(Path(wheel.path), filename)
        if self._fetcher is None or wheel.url is None:
            raise MetadataError(f"{package.name} {package.version}: {filename} has "
                                "no path and no URL to read its METADATA from")
        sha = wheel.hashes.get("sha256")
        link = Link(filename=filename, url=wheel.url, sha256=sha, size=wheel.size)
        return self._fetcher.get(link).requires_dist


def _from_file(path: Path, filename: str) -> tuple[Requirement, ...]:
    try:
        with zipfile.ZipFile(path) as archive:
            member = remote_zip.pick_metadata(archive.namelist(), filename)
            raw = archive.read(member)
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise MetadataError(f"{path}: cannot read METADATA ({exc})",
                            hint="check that the file is the locked wheel") from exc
    return parse_metadata(raw, filename, where=str(path)).requires_dist
