"""What a diff compares of each locked package, derived from the lock model.

A package is identified by its name (``name; marker`` when a lock lists a name
twice); its origin is the most precise one recorded (``index-name``, else the
``index`` URL, else the domain its files come from); its files are every wheel and
sdist by filename with their hashes. Works for any PEP 751 lock: stacklock's own,
uv's ``pylock.toml`` and snapshots of installed environments.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from stacklock.errors import LockError
from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.version import Version

    from stacklock.lock import Lock, LockedPackage

__all__ = ["ComparedPackage", "compared_packages"]


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

    @property
    def index(self) -> str | None:
        return self.index_name or self.index_url or self.domain


def compared_packages(lock: Lock) -> dict[str, ComparedPackage]:
    """The lock's packages keyed by name (``name; marker`` for a repeated name)."""
    seen = [_compared(p, f"{lock.path}: packages[{i}]")
            for i, p in enumerate(lock.packages)]
    counts = Counter(c.name for c in seen)
    out: dict[str, ComparedPackage] = {}
    for compared, package in zip(seen, lock.packages, strict=True):
        key = compared.name
        if counts[key] > 1:
            key = f"{key}; {package.marker}" if package.marker else compared.key_path
        out[key] = compared
    return out


def _compared(package: LockedPackage, key_path: str) -> ComparedPackage:
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
        source=_source_identity(package),
        index_name=package.tool.index_name,
        index_url=strip_credentials(entry.index) if entry.index else None,
        domain=_domain(url),
        cuda=package.cuda,
        files=files,
        record=package.tool.record_sha256,
        key_path=key_path,
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


def _source_identity(package: LockedPackage) -> str | None:
    entry = package.entry
    if entry.vcs is not None:
        where = entry.vcs.url or entry.vcs.path or ""
        return f"{strip_credentials(where)}@{entry.vcs.commit_id}"
    if entry.archive is not None:
        return _hash_text(entry.archive.hashes)
    if entry.directory is not None:
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
