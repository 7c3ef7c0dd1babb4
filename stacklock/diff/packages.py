"""What a diff compares of each locked package, derived from the lock model.

A package is identified by its name (``name; marker`` when a lock lists a name
twice); its origin is the most precise one recorded (``index-name``, else the
``index`` URL, else the domain its files come from); its files are every wheel and
sdist by filename with their hashes; a ``vcs``, ``directory`` or ``archive`` entry
by its source (url and commit, path, hash), whatever its ``version`` says. Works
for any PEP 751 lock: stacklock's own, those uv, pip, pdm and pex write, and
snapshots of installed environments.

:func:`paired_packages` puts the two locks' entries side by side: by name, and by
marker where a name is listed more than once; the entries of one name left over
on both sides (``torch`` under two markers for ``+cpu``, one entry for
``+cu128``) make one pair when each side holds one version of it, so a rebuild
is one change.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from stacklock.errors import LockError
from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.version import Version

    from stacklock.lock import Lock, LockedPackage

__all__ = ["ComparedPackage", "compared_packages", "paired_packages"]


@dataclass(frozen=True, kw_only=True)
class ComparedPackage:
    """One package as a diff sees it."""

    name: str
    version: Version | None
    source: str | None  # identity of a version-less package (vcs commit, archive)
    index_name: str | None
    index_url: str | None
    domain: str | None
    cuda: str | None
    files: Mapping[str, Mapping[str, str]]  # filename -> {algorithm: digest}
    record: str | None  # a snapshot's sha256 of the installed RECORD file
    key_path: str  # "locks/x.toml: packages[3]", for messages
    marker: str | None = None
    # the profile's patches applied to it: (file name, sha256, reason), in order
    patches: tuple[tuple[str, str, str], ...] = ()

    @property
    def index(self) -> str | None:
        return self.index_name or self.index_url or self.domain


def compared_packages(lock: Lock) -> dict[str, ComparedPackage]:
    """The lock's packages keyed by name (``name; marker`` for a repeated name)."""
    seen = [_compared(p, f"{lock.path}: packages[{i}]", lock)
            for i, p in enumerate(lock.packages)]
    counts = Counter(c.name for c in seen)
    return {_key(c, counts[c.name] > 1): c for c in seen}


def _key(view: ComparedPackage, repeated: bool) -> str:
    if not repeated:
        return view.name
    return f"{view.name}; {view.marker}" if view.marker else view.key_path


Pair = tuple[str, "ComparedPackage | None", "ComparedPackage | None"]


def paired_packages(old: Lock, new: Lock) -> list[Pair]:
    """``(key, old entry, new entry)`` for every package of either lock, sorted
    by key; an entry is None on the side that lacks it (see the module doc)."""
    by_name: dict[str, tuple[list[ComparedPackage], list[ComparedPackage]]] = {}
    for side, lock in enumerate((old, new)):
        for i, package in enumerate(lock.packages):
            view = _compared(package, f"{lock.path}: packages[{i}]", lock)
            by_name.setdefault(view.name, ([], []))[side].append(view)
    out: list[Pair] = []
    for name, (before, after) in by_name.items():
        if len(before) <= 1 and len(after) <= 1:
            out.append((name, before[0] if before else None,
                        after[0] if after else None))
            continue
        out += _pair_markers(name, before, after)
    return sorted(out, key=lambda pair: pair[0])


def _pair_markers(name: str, before: list[ComparedPackage],
                  after: list[ComparedPackage]) -> list[Pair]:
    """Entries of one name listed more than once on a side: the same marker
    pairs; what is left pairs as one when each side holds one version."""
    new_by_marker = {v.marker: v for v in after}
    out: list[Pair] = []
    left_old = []
    for view in before:
        match = new_by_marker.pop(view.marker, None)
        if match is None:
            left_old.append(view)
        else:
            out.append((_key(view, True), view, match))
    left_new = list(new_by_marker.values())
    if (left_old and left_new and len({_identity(v) for v in left_old}) == 1
            and len({_identity(v) for v in left_new}) == 1):
        return [*out, (name, left_old[0], left_new[0])]
    out += [(_key(v, True), v, None) for v in left_old]
    out += [(_key(v, True), None, v) for v in left_new]
    return out


def _identity(view: ComparedPackage) -> str:
    return view.source or str(view.version)


def _compared(package: LockedPackage, key_path: str, lock: Lock) -> ComparedPackage:
    entry = package.entry
    files: dict[str, Mapping[str, str]] = {}
    url = None
    for i, wheel in enumerate(package.wheels):
        name = _file_name(wheel.name, wheel.path, wheel.url)
        if not name:
            raise LockError(f"{key_path}.wheels[{i}]: no name, path or url")
        files[name] = wheel.hashes
        url = url or wheel.url
    sdist = entry.sdist
    if sdist is not None:
        name = _file_name(sdist.name, sdist.path, sdist.url)
        if not name:
            raise LockError(f"{key_path}.sdist: no name, path or url")
        files[name] = sdist.hashes
        url = url or sdist.url
    if entry.archive is not None:
        url = url or entry.archive.url
    return ComparedPackage(
        name=package.name,
        version=package.version,
        source=_source_identity(package, snapshot=lock.snapshot is not None),
        index_name=package.tool.index_name,
        index_url=strip_credentials(entry.index) if entry.index else None,
        domain=_domain(url),
        cuda=package.cuda,
        files=files,
        record=package.tool.record_sha256,
        key_path=key_path,
        marker=str(package.marker) if package.marker is not None else None,
        patches=tuple((PurePosixPath(p.path).name, p.sha256, p.reason)
                      for p in package.tool.patches),
    )


def _file_name(name: str | None, path: str | None, url: str | None) -> str | None:
    """The file's name as PEP 751 defines it (``name``, else the last part of
    ``path`` or ``url``); split by hand because urllib's parser is the slowest
    step of reading a 600-package lock."""
    if name:
        return name
    where = path or url
    if not where:
        return None
    last = where.partition("#")[0].partition("?")[0].rstrip("/").rpartition("/")[2]
    return unquote(last) if "%" in last else last


def _source_identity(package: LockedPackage, *, snapshot: bool) -> str | None:
    """The source a vcs, directory or archive entry installs from; a
    snapshot's directory only says where a version was found installed."""
    entry = package.entry
    if entry.vcs is not None:
        where = entry.vcs.url or entry.vcs.path or ""
        return f"{strip_credentials(where)}@{entry.vcs.commit_id}"
    if entry.archive is not None:
        return _hash_text(entry.archive.hashes)
    if entry.directory is not None and not (snapshot and package.version):
        return entry.directory.path
    return None


def _domain(url: str | None) -> str | None:
    """The registrable-looking tail of a file's host: ``files.pythonhosted.org`` ->
    ``pythonhosted.org``, so mirrors of one CDN do not read as an index move."""
    if not url:
        return None
    host = urlsplit(url).hostname
    if not host:
        return None
    return ".".join(host.split(".")[-2:])


def _hash_text(hashes: Mapping[str, str]) -> str:
    algo = "sha256" if "sha256" in hashes else min(hashes, default="")
    return f"{algo}:{hashes[algo]}" if algo else ""
