"""A few named files of a wheel and its RECORD, read with as few bytes as possible.

Resolve needs, for a patched package, the files its patches change and the
wheel's RECORD, not the wheel. In order: the artifact store (by sha256) or a
local file (a folder index, a ``path``), else HTTP range reads
(:mod:`~stacklock.metadata.remote_zip`: the tail, the central directory, then
only the wanted members, in as few requests as their places allow), else, where
the server ignores ``Range``, one download into the store. Each member is
CRC-checked; the bytes of a patched file are then checked against the RECORD's
sha256 by the caller.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from stacklock.errors import MetadataError, ZipReadError
from stacklock.http import describe_http_error, is_network_failure
from stacklock.metadata import remote_zip
from stacklock.metadata.archive_errors import BROKEN_ARCHIVE
from stacklock.metadata.ranges import RangeReader
from stacklock.record import (
    MAX_RECORD_BYTES,
    Record,
    check_record_size,
    parse_record,
    record_name,
    wheel_record,
)
from stacklock.urls import file_url_path, redact_url

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from pathlib import Path

    from stacklock.store import ArtifactStore

__all__ = ["WheelFiles", "read_wheel_files"]

_TAIL = 64 << 10


@dataclass(frozen=True, kw_only=True)
class WheelFiles:
    """What was read of a wheel: every member's name, its RECORD (read by
    :func:`stacklock.record.parse_record`) and its name, and the wanted members
    it holds (a wanted name that is no member, or a folder, is absent);
    ``bytes_read`` from the network."""

    names: frozenset[str]
    record_name: str
    record: Record
    files: dict[str, bytes]
    bytes_read: int = 0


def read_wheel_files(http: httpx.Client, *, filename: str, url: str | None,
                     sha256: str, size: int | None,
                     wanted: Collection[str] | Callable[[str], bool],
                     store: ArtifactStore, offline: bool,
                     path: Path | None = None) -> WheelFiles:
    """The RECORD and the ``wanted`` members of the wheel ``filename`` (see
    the module docstring): names, or a test of a name; ``path`` is a local copy
    the lock names."""
    want = wanted if callable(wanted) else wanted.__contains__
    local = path or store.path_for(sha256)
    if local is None and url is not None:
        local = file_url_path(url)
    if local is not None:
        return _from_file(local, filename, want)
    if offline or url is None:
        raise MetadataError(f"{filename}: not in the artifact cache, and "
                            + ("--offline" if offline else "the lock names no URL"),
                            hint="run once without --offline, or stacklock install "
                            "the lock (which fills the cache)")
    counted = [0]

    def count(n: int) -> None:
        counted[0] += n

    try:
        reader = RangeReader(http, url, on_bytes=count)
        if not reader.open_tail(_TAIL, size_hint=size):
            local, _sha = store.fetch(http, url, expected_sha256=sha256, size=size)
            found = _from_file(local, filename, want)
            return WheelFiles(names=found.names, record_name=found.record_name,
                              record=found.record, files=found.files,
                              bytes_read=local.stat().st_size)
        entries = remote_zip.read_entries(reader)
        names = frozenset(e.name for e in entries)
        name = record_name(names, filename)
        record = next(e for e in entries if e.name == name)
        check_record_size(record.size, where=f"{filename}: {name}")
        chosen = [e for e in entries if want(e.name) and e.name != name]
        remote_zip.prefetch_entries(reader, [*chosen, record])
        read = {e.name: remote_zip.read_entry(reader, e) for e in chosen}
        record_bytes = remote_zip.read_entry(reader, record, limit=MAX_RECORD_BYTES)
    except httpx.HTTPError as exc:
        raise MetadataError(f"{redact_url(url)}: cannot read {filename} "
                            f"({describe_http_error(exc)})",
                            hint="check the network or the index",
                            network=is_network_failure(exc)) from exc
    except ZipReadError as exc:
        raise MetadataError(f"{redact_url(url)}: cannot read {filename}: {exc}",
                            hint="the wheel or the server's range answers are "
                            "broken") from exc
    return WheelFiles(names=names, record_name=name,
                      record=parse_record(record_bytes, where=f"{filename}: {name}",
                                          installed=False),
                      files=read, bytes_read=counted[0])


def _from_file(path: Path, filename: str,
               want: Callable[[str], bool]) -> WheelFiles:
    try:
        with zipfile.ZipFile(path) as archive:
            names = frozenset(archive.namelist())
            name, record = wheel_record(archive, filename)
            files = {member: archive.read(member) for member in sorted(names)
                     if want(member) and not member.endswith("/")}
    except BROKEN_ARCHIVE as exc:
        raise MetadataError(f"{path}: cannot read {filename}: {exc}",
                            hint="delete the file from the cache and try again"
                            ) from exc
    return WheelFiles(names=names, record_name=name, record=record, files=files)
