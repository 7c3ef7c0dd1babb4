"""What the lock already holds, preferred while it still satisfies the profile.

A committed lock is a decision: re-resolving its profile a day later must not move
it because an index published something newer (uv's lock, Cargo, Poetry and pdm
keep what is locked unless told to upgrade). So ``stacklock resolve`` reads the lock
at its output path first; for every project it holds, the resolver tries the locked
version before any other (:mod:`stacklock.resolve.provider`), and where that version
is chosen again the locked file and its sha256 are kept (:mod:`stacklock.resolve.
hashes`), so a wheel hashed by download is not downloaded again. A locked version
the profile no longer allows, or one the index no longer serves, is simply not
preferred: the resolver moves on as it would without a lock.

The lock's ``passed-over`` entries come along (``passed_over``): a resolution that
keeps the pins never tries what was passed over, so it would not find again why
the lock holds what it holds (:func:`stacklock.resolve.moves.kept_from_lock`).

``--upgrade`` ignores the lock; ``--upgrade-package NAME`` releases one project.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.utils import NormalizedName, canonicalize_name

from stacklock.errors import LockError, StacklockError
from stacklock.lock import load_lock
from stacklock.lock.model import wheel_sha256

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

    from packaging.pylock import PackageSdist, PackageWheel
    from packaging.version import Version

    from stacklock.resolve.model import Candidate

__all__ = ["LockedPin", "Preferences", "load_preferences", "locked_first"]


@dataclass(frozen=True, kw_only=True)
class LockedPin:
    """One project as the lock holds it: its version and the file recorded."""

    version: Version
    filename: str
    sha256: str
    hash_source: str  # "index" | "download", as the lock says


@dataclass(frozen=True, kw_only=True)
class Preferences:
    """The pins to prefer, and what they were read from: ``seed`` is the sha256
    of the lock's bytes, "" for no lock, and None when ``--upgrade`` said to
    ignore whatever is there (the resolution then does not depend on it)."""

    pins: Mapping[NormalizedName, LockedPin] = field(default_factory=dict)
    seed: str | None = ""
    released: tuple[str, ...] = ()  # --upgrade-package names, sorted
    # the lock's [tool.stacklock.check] passed-over: {package, version, reason}
    passed_over: tuple[Mapping[str, str], ...] = ()

    def version_of(self, name: str) -> Version | None:
        pin = self.pins.get(canonicalize_name(name))
        return pin.version if pin is not None else None


def locked_first(found: list[Candidate], locked: Version | None
                 ) -> list[Candidate]:
    """``found`` (newest first) with the locked version, when among them, first."""
    if locked is None:
        return found
    at = next((i for i, c in enumerate(found) if c.version == locked), None)
    if not at:  # absent, or first already
        return found
    return [found[at], *found[:at], *found[at + 1:]]


def load_preferences(path: Path, *, upgrade: bool = False,
                     upgrade_packages: Iterable[str] = ()) -> Preferences:
    """The pins of the lock at ``path`` (none when there is no file there), less
    the ``upgrade_packages``; ``upgrade`` ignores the file altogether. A file that
    is there but cannot be read is an error: resolving over it would silently
    throw its pins away."""
    released = tuple(sorted({canonicalize_name(n) for n in upgrade_packages}))
    if upgrade:
        return Preferences(seed=None)
    if not path.exists() and not path.is_symlink():
        return Preferences(released=released)
    try:
        lock = load_lock(path)
        content = path.read_bytes()
    except (StacklockError, OSError) as exc:
        why = exc.message if isinstance(exc, StacklockError) else \
            f"{path}: {exc.strerror or exc}"
        raise LockError(f"{why} (the lock whose pins resolve keeps)",
                        hint="fix or remove it, or resolve with --upgrade") from None
    pins: dict[NormalizedName, LockedPin] = {}
    for package in lock.packages:
        entry = package.entry
        files: list[PackageWheel | PackageSdist] = [
            *(entry.wheels or ()), *([entry.sdist] if entry.sdist else [])]
        if entry.version is None or not files or entry.marker is not None:
            continue  # nothing a resolver of one target could prefer
        first = files[0]
        pins[package.name] = LockedPin(
            version=entry.version, filename=first.filename,
            sha256=wheel_sha256(first) or "",
            hash_source=package.tool.hash_source or "index")
    unknown = [n for n in released if n not in pins]
    if unknown:
        raise StacklockError(
            f"--upgrade-package {', '.join(unknown)}: not in {path}, so nothing of "
            "it is kept to release", hint="name a package the lock holds, or "
            "--upgrade to release them all")
    for name in released:
        del pins[name]
    return Preferences(pins=pins, seed=hashlib.sha256(content).hexdigest(),
                       released=released, passed_over=lock.stack.check_passed_over
                       if lock.stack is not None else ())
