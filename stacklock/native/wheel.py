"""The shared objects of one wheel, read remotely as far as needed, cached by sha256.

A wheel's file list comes from its central directory (one suffix read, none when
the resolve's METADATA read held the whole directory). A shared object over
:data:`~stacklock.native.partial.PARTIAL_MIN` compressed is read from its head,
its tail and its dynamic segment (:mod:`stacklock.native.partial`: the compressed
bytes of just those parts, fetched together for all of a wheel's members); the
others, and those that cannot be read so, are inflated from their zip member,
fetched by HTTP range requests in pieces, only as far as the loader's view reaches
(:mod:`stacklock.native.elf`). The result is cached under ``<cache>/native/`` by
the wheel's sha256, so each wheel is read once per machine; a wheel already in the
artifact store is read from disk.

Libraries (``lib*.so*``) over :data:`LARGE_MEMBER` compressed (cuDNN, cuBLAS,
libtorch_cuda: 3 GB of a CUDA 13 stack) and extension modules over
:data:`LARGE_EXTENSION` are listed in ``large`` and left unread; the check asks
for one with :meth:`WheelReader.read_large` only when an extension's symbols need
it. Extension modules are where a stack breaks (built against another torch or
CUDA), so they are read up to a larger size.
"""

from __future__ import annotations

import functools
import io
import json
import threading
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import httpx
from isal import igzip, isal_zlib

from stacklock._fs import atomic_write_bytes
from stacklock.bounded import parse_json
from stacklock.errors import NativeError, ZipReadError
from stacklock.http import describe_http_error, is_network_failure
from stacklock.metadata import remote_zip
from stacklock.metadata.archive_errors import BROKEN_ARCHIVE
from stacklock.metadata.listings import Listing, Listings
from stacklock.metadata.ranges import RangeReader
from stacklock.native.elf import (
    SHARED_OBJECT_MARK,
    SharedObject,
    is_shared_object_name,
    parse_shared_object,
)
from stacklock.native.families import owned_families
from stacklock.native.partial import PARTIAL_MIN, Unavailable, read_members
from stacklock.native.shared import SharedFacts
from stacklock.native.stream import Discarded, InflatedMember, SpillFailed
from stacklock.store import ArtifactStore
from stacklock.urls import file_url_path, redact_url

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator


__all__ = ["LARGE_MEMBER", "NativeWheel", "ReadStopped", "WheelNatives", "WheelReader"]

_FORMAT = 1  # of the cache entries (``large`` is new and optional)
_TAIL = 16 * 1024  # most central directories fit; a larger one is read after
LARGE_MEMBER = 8 << 20  # compressed bytes of a library read only when needed
LARGE_EXTENSION = 32 << 20  # the same for an extension module (not lib*)
_SMALL = 1 << 20  # members read whole, neighbours in one request
_ENTRY_LIMIT = 64 << 20  # inflated bytes of one facts entry (libtorch's: ~2 MB)
_PIECE = 1 << 20  # compressed bytes a streamed member is fetched in


class ReadStopped(Exception):
    """A read given a ``stop`` event that was set: it ended at its next answer,
    its facts unsaved (a read ahead of the resolver that is no longer wanted)."""


def _is_large(path: str, compressed: int) -> bool:
    library = path.rsplit("/", 1)[-1].startswith("lib")
    return compressed > (LARGE_MEMBER if library else LARGE_EXTENSION)


@dataclass(frozen=True, kw_only=True)
class NativeWheel:
    """One locked wheel: what the reader needs to find and name it."""

    package: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int | None = None


@dataclass(frozen=True, kw_only=True)
class WheelNatives:
    """``files``: every shared-object-like member path (what the wheel puts on
    disk for the loader to find); ``objects``: those that are ELF shared objects;
    ``large``: members not read yet (see the module docstring)."""

    sha256: str
    files: tuple[str, ...]
    objects: tuple[SharedObject, ...]
    large: tuple[str, ...] = ()

    @functools.cached_property
    def exports(self) -> frozenset[str]:
        """Every symbol its objects export (torch's: ~100,000), made once."""
        return frozenset(s for o in self.objects for s in o.exported)

    @functools.cached_property
    def families(self) -> frozenset[str]:
        """The symbol families it owns (:func:`owned_families`), made once."""
        return owned_families(self.exports)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "format": _FORMAT,
            "sha256": self.sha256,
            "files": list(self.files),
            "objects": [o.to_dict() for o in self.objects],
        }
        if self.large:
            out["large"] = list(self.large)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WheelNatives:
        return cls(
            sha256=str(data["sha256"]),
            files=tuple(data["files"]),
            objects=tuple(SharedObject.from_dict(o) for o in data["objects"]),
            large=tuple(data.get("large", ())),
        )


class WheelReader:
    """Reads :class:`WheelNatives` for locked wheels; safe to use from threads.

    ``bytes_read`` counts response-body bytes taken from the network,
    ``bytes_by_wheel`` the same per wheel filename (0 for a cached wheel),
    ``requests`` the range requests answered. ``listings``: central
    directories the resolve's METADATA reads held whole
    (:mod:`stacklock.metadata.listings`); a wheel listed there is not asked
    for its directory again.

    One wheel is read by one thread at a time: a second caller waits and then
    takes what the first found, so a read started ahead of the check is not
    repeated by the check. A read given a ``stop`` event ends with
    :class:`ReadStopped` at its next answer once the event is set.
    """

    def __init__(
        self,
        http: httpx.Client,
        *,
        cache_dir: Path,
        offline: bool = False,
        store: ArtifactStore | None = None,
        listings: Listings | None = None,
        shared: SharedFacts | None = None,
        partial: int | None = PARTIAL_MIN,
    ) -> None:
        self._http = http
        # facts a team or fleet shares (STACKLOCK_NATIVE_FACTS), asked on a
        # local miss, once per wheel and run
        self.shared = shared if shared is not None else \
            SharedFacts.from_env(http, offline=offline)
        self._asked_shared: set[str] = set()
        # directories known without a request: the resolve's, and the ones
        # list_files read (read() then starts at the members)
        self._listings = listings or Listings(keep=is_shared_object_name,
                                              contains=SHARED_OBJECT_MARK)
        self._dir = Path(cache_dir) / "native"
        self._offline = offline
        # members of at least this many compressed bytes from their head, tail
        # and dynamic segment (native.partial); None: every member whole (the
        # benches' and live tests' comparison)
        self._partial = partial
        self._store = store or ArtifactStore(Path(cache_dir) / "artifacts")
        self._lock = threading.Lock()
        self.bytes_read = 0
        self.bytes_by_wheel: dict[str, int] = {}
        self._memo: dict[str, WheelNatives] = {}  # sha256 -> facts of this run
        self._busy: dict[str, threading.Lock] = {}  # sha256 -> held while read
        self._listing_busy: dict[str, threading.Lock] = {}  # ... while listed
        self.requests = 0

    def read(self, wheel: NativeWheel, *,
             stop: threading.Event | None = None) -> WheelNatives:
        """The wheel's facts, its large members left unread."""
        return self._read(wheel, (), stop)

    def list_files(self, wheel: NativeWheel, *,
                   stop: threading.Event | None = None) -> tuple[str, ...]:
        """The wheel's shared-object-like members, from no more than its
        central directory (which the resolve's METADATA read has usually seen
        whole). A wheel without one is cached as read: there is nothing more.
        One listing of a wheel at a time, not held up by a read of it."""
        with self._lock:
            busy = self._listing_busy.setdefault(wheel.sha256.lower(),
                                                 threading.Lock())
        with busy:
            return self._list_files(wheel, stop)

    def _list_files(self, wheel: NativeWheel,
                    stop: threading.Event | None) -> tuple[str, ...]:
        cached = self._memo.get(wheel.sha256) or self._from_cache(wheel.sha256)
        if cached is not None:
            self._count(wheel.filename, 0)
            return cached.files
        if self._offline or self._local(wheel) is not None:
            return self._read(wheel, (), stop).files
        listing = self._listing(wheel)
        if listing is None:
            reader = self._range_reader(wheel, stop)
            try:
                entries = self._directory(reader, wheel)
            except httpx.HTTPError as exc:
                raise _unreadable(wheel, exc) from exc
            except ZipReadError as exc:
                raise NativeError(f"{redact_url(wheel.url)}: cannot read the "
                                  f"wheel: {exc}") from exc
            self._listings.add(wheel.url, reader.size, entries)
            listing = self._listing(wheel)
            assert listing is not None
        files = tuple(sorted(e.name for e in listing.entries))
        if not files:
            self.remember(_natives(wheel, (), []))
        return files

    def read_large(self, wheel: NativeWheel, paths: Iterable[str], *,
                   stop: threading.Event | None = None) -> WheelNatives:
        """The wheel's facts with the large members ``paths`` read too."""
        return self._read(wheel, tuple(paths), stop)

    def planned_bytes(self, wheel: NativeWheel) -> tuple[int, int]:
        """Compressed bytes of the shared objects :meth:`read` would fetch,
        and of the large ones it would leave, as far as the wheel's known
        directory says ((0, 0) when not known)."""
        listing = self._listing(wheel)
        if listing is None:
            return 0, 0
        sizes = [(e.compressed_size, _is_large(e.name, e.compressed_size))
                 for e in listing.entries]  # shared objects only (Listings)
        return (sum(n for n, large in sizes if not large),
                sum(n for n, large in sizes if large))

    def _read(self, wheel: NativeWheel, wanted: tuple[str, ...],
              stop: threading.Event | None) -> WheelNatives:
        with self._lock:  # one read of a wheel at a time
            busy = self._busy.setdefault(wheel.sha256.lower(), threading.Lock())
        with busy:
            return self._read_unlocked(wheel, wanted, stop)

    def _read_unlocked(self, wheel: NativeWheel, wanted: tuple[str, ...],
                       stop: threading.Event | None) -> WheelNatives:
        cached = self._memo.get(wheel.sha256) or self._from_cache(wheel.sha256)
        if cached is not None and (self._offline
                                   or not set(wanted) & set(cached.large)):
            self._count(wheel.filename, 0)
            return cached  # offline, the large members stay unread
        local = self._local(wheel)
        if local is not None:
            natives = _read_local(local, wheel)
        elif self._offline:
            raise NativeError(
                f"{wheel.filename}: its shared objects are not cached",
                hint="run once without --offline to fill the cache, or resolve "
                "with --no-check",
            )
        else:
            natives = self._read_remote(wheel, wanted, cached, stop)
        self.remember(natives)
        return natives

    def remember(self, natives: WheelNatives) -> None:
        """Cache ``natives`` under its wheel's sha256 (no fsync: a torn entry
        fails to parse and the wheel is read again)."""
        self._memo[natives.sha256] = natives
        # ISA-L's gzip at level 1: a quarter of zlib's level 1 CPU (15.6 MB of
        # JSON for pypi-cu130's 207 wheels: 17 against 62 ms), smaller entries
        blob = igzip.compress(json.dumps(natives.to_dict()).encode(),
                              compresslevel=1, mtime=0)
        atomic_write_bytes(self._entry(natives.sha256), blob, durable=False)

    def _entry(self, sha256: str) -> Path:
        key = sha256.lower()
        return self._dir / f"{key}.json.gz"

    def _from_cache(self, sha256: str) -> WheelNatives | None:
        try:
            blob: bytes | None = self._entry(sha256).read_bytes()
        except OSError:
            blob = None  # absent: the shared source, else read the wheel
        found = _parse_entry(blob, sha256)  # a torn one: the same
        if found is None and self.shared is not None:
            found = self._from_shared(sha256, self.shared)
        return found

    def _from_shared(self, sha256: str, shared: SharedFacts) -> WheelNatives | None:
        with self._lock:
            if sha256 in self._asked_shared:
                return None
            self._asked_shared.add(sha256)
        blob = shared.entry(sha256)
        if blob is None:
            return None  # not there (or unreachable: counted by the source)
        found = _parse_entry(blob, sha256)
        shared.used(sha256, found is not None)
        if found is not None:
            self._memo[sha256] = found
            if blob[:2] != b"\x1f\x8b":  # sent inflated (Content-Encoding)
                blob = igzip.compress(blob, compresslevel=1, mtime=0)
            # kept here as given: the next run asks no one
            atomic_write_bytes(self._entry(sha256), blob, durable=False)
        return found

    def _count(self, filename: str, n: int, *, requests: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes_read += n
            self.bytes_by_wheel[filename] = self.bytes_by_wheel.get(filename, 0) + n

    def _read_remote(self, wheel: NativeWheel, wanted: tuple[str, ...],
                     known: WheelNatives | None,
                     stop: threading.Event | None) -> WheelNatives:
        """Read the wheel's shared objects, the large ones only if ``wanted``;
        ``known``: what an earlier read found (not read again). A directory
        the resolve's METADATA read held whole takes the place of the tail
        read: a wheel without a shared object then costs no request."""
        reader = self._range_reader(wheel, stop)
        listing = self._listing(wheel)
        try:
            if listing is not None:
                reader.open_known(listing.size)
                entries = list(listing.entries)
            else:
                entries = self._directory(reader, wheel)
            files = tuple(sorted(e.name for e in entries
                                 if is_shared_object_name(e.name)))
            objects = list(known.objects) if known is not None else []
            done = {o.path for o in objects}
            if known is not None:
                done |= set(known.files) - set(known.large)  # not ELF after all
            todo = [e for e in entries if e.name in files and e.name not in done]
            # one member read per content, a wanted one where there is one
            wanted_first = sorted(todo, key=lambda e: e.name not in wanted)
            copies = _copies([(e.name, (e.crc, e.size, e.compressed_size))
                              for e in wanted_first])
            large = [e.name for e in todo if e.name not in wanted
                     and e.name not in copies and _is_large(e.name, e.compressed_size)]
            large += [path for path, source in copies.items() if source in large]
            read = [e for e in todo if e.name not in large and e.name not in copies]
            # the larger members from their head, tail and dynamic segment; those
            # that cannot be read so, and the small ones, whole
            least = self._partial
            in_part = [e for e in read if least is not None and e.method == 8
                       and e.compressed_size >= least]
            # the members read whole come in the first round of the partial
            # reads, sharing requests with their neighbours' heads and tails
            whole = [e for e in read if e not in in_part and
                     e.compressed_size <= _SMALL]
            parts = read_members(reader, in_part,
                                 alongside=remote_zip.prefetch_spans(whole))
            objects += [found for found in parts.values()
                        if isinstance(found, SharedObject)]
            read = [e for e in read if isinstance(parts.get(e.name, Unavailable()),
                                                  Unavailable)]
            small = [e for e in read if e.compressed_size <= _SMALL]
            remote_zip.prefetch_entries(reader, small)  # few requests for many
            for entry in small:
                with io.BytesIO(remote_zip.read_entry(reader, entry)) as member:
                    found = _parse(member, entry.name, wheel)
                if found is not None:
                    objects.append(found)
            for entry in read:
                if entry in small:
                    continue
                found = _parse_streamed(reader, entry, wheel,
                                        skip=entry.name in wanted)
                if found is not None:
                    objects.append(found)
            objects.extend(_copied(objects, copies))
        except httpx.HTTPError as exc:
            raise _unreadable(wheel, exc) from exc
        except ZipReadError as exc:
            raise NativeError(f"{redact_url(wheel.url)}: cannot read the wheel: "
                              f"{exc}") from exc
        return replace(_natives(wheel, files, objects), large=tuple(sorted(large)))

    def _range_reader(self, wheel: NativeWheel,
                      stop: threading.Event | None) -> RangeReader:
        def on_bytes(n: int) -> None:
            self._count(wheel.filename, n, requests=1)
            if stop is not None and stop.is_set():
                raise ReadStopped(wheel.filename)

        return RangeReader(self._http, wheel.url, on_bytes=on_bytes)

    def _listing(self, wheel: NativeWheel) -> Listing | None:
        """The wheel's directory, when known without a request."""
        listing = self._listings.get(wheel.url)
        if listing is not None and wheel.size not in (None, listing.size):
            return None  # another file than the one listed
        return listing

    def _local(self, wheel: NativeWheel) -> Path | None:
        local = self._store.path_for(wheel.sha256)
        return local if local is not None else file_url_path(wheel.url)

    @staticmethod
    def _directory(reader: RangeReader, wheel: NativeWheel) -> list[remote_zip.Entry]:
        """The wheel's central directory, from a read of its tail."""
        if not reader.open_tail(_TAIL, size_hint=wheel.size):
            raise NativeError(
                f"{redact_url(wheel.url)}: the server ignores HTTP range requests",
                hint="check the wheel with a full download in the artifact "
                "cache (stacklock install fills it)",
            )
        return remote_zip.read_entries(reader, contains=SHARED_OBJECT_MARK)


def _unreadable(wheel: NativeWheel, exc: httpx.HTTPError) -> NativeError:
    return NativeError(
        f"{redact_url(wheel.url)}: cannot read the wheel "
        f"({describe_http_error(exc)})",
        hint="check the network, or use --offline with a filled cache",
        network=is_network_failure(exc),
    )


def _parse_streamed(reader: RangeReader, entry: remote_zip.Entry,
                    wheel: NativeWheel, *, skip: bool) -> SharedObject | None:
    """A member read only as far as the loader's view reaches (NVIDIA's
    libraries end it early), its middle (the code) not kept, and read again
    keeping all if the view needs the middle after all. ``skip``: a large
    member, whose middle is dropped even where the ELF reader gives no hint."""
    # a medium member in pieces of 1 MiB: a view that ends early (NVIDIA's)
    # costs little more; a large one is read to its end in 8 MiB pieces
    return _parse_member(
        lambda: remote_zip.iter_member(reader, entry,
                                       chunk_size=8 * _PIECE if skip else _PIECE),
        entry.name, entry.size, wheel, skip=skip)


def _parse_member(chunks: Callable[[], Iterator[bytes]], path: str, size: int,
                  wheel: NativeWheel, *, skip: bool) -> SharedObject | None:
    """The loader's view of the member whose inflated bytes ``chunks()`` hands
    out, what the ELF reader will not come back for not kept (see
    :mod:`stacklock.native.stream`); read again keeping all when a read falls
    in what was dropped."""
    for keep_all in (False, True):
        pieces = chunks()
        # a medium member's gap waits for the ELF reader's hint
        try:
            with InflatedMember(pieces, size=size, skip=not keep_all,
                                keep_until=None if skip else size) as streamed:
                return _parse(streamed, path, wheel,
                              tables_before=None if keep_all else streamed.keep_until,
                              tables_at=None if keep_all else streamed.reads_at)
        except Discarded:
            continue
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()  # a local member's file, a remote one's fetches
    raise AssertionError("unreachable: the second read keeps every byte")


def _parse(
    stream: IO[bytes] | io.RawIOBase, path: str, wheel: NativeWheel, *,
    tables_before: Callable[[int], None] | None = None,
    tables_at: Callable[[list[int]], None] | None = None,
) -> SharedObject | None:
    try:
        return parse_shared_object(stream, path=path, tables_before=tables_before,
                                   tables_at=tables_at)
    except ValueError as exc:  # an OSError is the disk's (a full temporary folder)
        raise NativeError(
            f"{wheel.filename}: {path} is not a readable ELF file: {exc}",
            hint="the wheel is broken; exclude this version",
        ) from exc


def _natives(
    wheel: NativeWheel, files: tuple[str, ...], objects: list[SharedObject]
) -> WheelNatives:
    return WheelNatives(
        sha256=wheel.sha256.lower(),
        files=files,
        objects=tuple(sorted(objects, key=lambda o: o.path)),
    )


def _read_local(path: Path, wheel: NativeWheel) -> WheelNatives:
    try:
        with zipfile.ZipFile(path) as archive:
            files = tuple(sorted(n for n in archive.namelist()
                                 if is_shared_object_name(n)))
            infos = [archive.getinfo(name) for name in files]
            copies = _copies([(i.filename, (i.CRC, i.file_size, i.compress_size))
                              for i in infos])
            objects = []
            for info in infos:
                if info.filename in copies:
                    continue
                found = _parse_member(
                    functools.partial(_member_pieces, archive, info.filename),
                    info.filename, info.file_size, wheel, skip=False)
                if found is not None:
                    objects.append(found)
            objects.extend(_copied(objects, copies))
    except SpillFailed:
        raise  # the temporary folder's, not the wheel's: the line names it
    except BROKEN_ARCHIVE as exc:
        raise NativeError(
            f"{path}: cannot read {wheel.filename}: {exc}",
            hint="delete the file from the artifact cache and try again",
        ) from exc
    return _natives(wheel, files, objects)


def _copies(members: Iterable[tuple[str, tuple[int, int, int]]]) -> dict[str, str]:
    """Each member whose content another member before it has (CRC-32,
    inflated and compressed size alike) -> that member's path: a wheel holds no
    symbolic links, so triton 3.8 ships ``libcupti.so``, ``libcupti.so.13`` and
    ``libcupti.so.2026.2.0`` as three copies of one file (9.4 MB of its 35.6 MB
    read). The copy is not read; it has the facts of the one read, under its
    own path. Two different members alike in all three happen by chance about
    once in 2**32; a member crafted to claim another's CRC-32 does not install
    (uv refuses a member whose bytes do not match it), so its lock fails there."""
    first: dict[tuple[int, int, int], str] = {}
    copies: dict[str, str] = {}
    for path, content in members:
        copies_of = first.setdefault(content, path)
        if copies_of != path:
            copies[path] = copies_of
    return copies


def _copied(objects: list[SharedObject], copies: dict[str, str]) -> list[SharedObject]:
    """The objects of ``copies`` (path -> the path read), from those read."""
    by_path = {o.path: o for o in objects}
    return [replace(by_path[source], path=path) for path, source in copies.items()
            if source in by_path]


def _member_pieces(archive: zipfile.ZipFile, name: str) -> Iterator[bytes]:
    """A local wheel's member, inflated in pieces; its file closed when this
    ends or is closed."""
    with archive.open(name) as raw:
        while piece := raw.read(1 << 20):
            yield piece


# what a facts entry that is torn, or not ours, raises as it is parsed
_TORN_ENTRY: tuple[type[Exception], ...] = (
    *remote_zip.BAD_DEFLATE, ValueError, KeyError, TypeError, AttributeError)


def _parse_entry(blob: bytes | None, sha256: str) -> WheelNatives | None:
    """A facts entry's :class:`WheelNatives`, or None for anything else: absent,
    torn, of another format or another wheel, or inflating past
    :data:`_ENTRY_LIMIT` (an entry from a shared source is not ours). A gzip
    entry or its JSON (a server that sent it ``Content-Encoding: gzip``)."""
    if not blob:
        return None
    try:
        if blob[:2] == b"\x1f\x8b":
            inflate = isal_zlib.decompressobj(wbits=31)
            blob = inflate.decompress(blob, _ENTRY_LIMIT)
            if inflate.unconsumed_tail:
                return None
        data = parse_json(blob)
        if data.get("format") == _FORMAT and data.get("sha256") == sha256.lower():
            return WheelNatives.from_dict(data)
    except _TORN_ENTRY:
        pass
    return None
