"""Read one member of a remote zip with HTTP range requests.

A wheel's central directory sits at the end of the file and, by the wheel spec's
recommendation, ``*.dist-info/`` is written last, so its entries are the last ones
in the central directory. One suffix read of the tail (64 KiB) therefore finds the
end-of-central-directory record (ZIP64 too) and, usually, the METADATA entry itself;
a second read fetches just that member. torch's central directory alone is 1.1 MB,
so instead of reading all of it, entries are parsed from the first ``PK\\1\\2``
signature in the tail whose chain of entries ends exactly where the directory ends.
Only when METADATA is not among those entries is the rest of the directory read.

Reads go through :class:`~stacklock.metadata.ranges.RangeReader`, a tiny block
cache of fetched byte ranges.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from isal import isal_zlib
from packaging.utils import canonicalize_name, parse_wheel_filename

from stacklock.errors import ZipReadError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from stacklock.metadata.ranges import RangeReader

__all__ = [
    "BAD_DEFLATE",
    "Entry",
    "data_start",
    "guess_data_start",
    "iter_member",
    "local_span",
    "pick_metadata",
    "prefetch_entries",
    "read_dist_info",
    "read_dist_info_metadata",
    "read_entries",
    "read_entry",
    "read_member",
]

_EOCD = struct.Struct("<4sHHHHIIH")  # end of central directory, 22 bytes
_LOCATOR = struct.Struct("<4sIQI")  # ZIP64 end of central directory locator, 20
_EOCD64 = struct.Struct("<4sQHHIIQQQQ")  # ZIP64 end of central directory, 56
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")  # central directory entry, 46
_LOCAL = struct.Struct("<4sHHHHHIIIHH")  # local file header, 30
_SLACK = 512  # extra bytes read past a member, in case its local extra field grew
_INFLATE_STEP = 256 << 10  # compressed bytes inflated at a time
_INFLATED_AT_MOST = 4 << 20  # the most one inflated piece holds
MAX_METADATA_BYTES = 64 << 20  # real ones: a few kB to ~1 MB (a whole README)
_METADATA_SUFFIX = b".dist-info/METADATA"
_MAX_NAME = 1024 + _CENTRAL.size  # how far before a name its entry may start
# ISA-L inflates (isal_zlib: zlib's API, ~1.8x its speed); its stub types its
# error as an instance, hence the cast
BAD_DEFLATE: tuple[type[Exception], ...] = (
    zlib.error, cast("type[Exception]", isal_zlib.error))


@dataclass(frozen=True, kw_only=True)
class Entry:
    name: str
    flags: int
    method: int
    crc: int
    compressed_size: int
    header_offset: int
    extra_len: int
    size: int = 0  # uncompressed


def _directory_bounds(reader: RangeReader) -> tuple[int, int, int]:
    """(start of central directory, its end, number of entries), ZIP64 aware."""
    base = reader.tail_start
    tail = reader.read_at(base, reader.size - base)
    pos = tail.rfind(b"PK\x05\x06", 0, len(tail) - _EOCD.size + 4)
    while pos >= 0 and pos + _EOCD.size + _EOCD.unpack_from(tail, pos)[7] != len(tail):
        pos = tail.rfind(b"PK\x05\x06", 0, pos)
    if pos < 0:
        raise ZipReadError("no end-of-central-directory record (not a zip?)")
    _sig, _d, _cd, _n1, count, cd_size, cd_offset, _c = _EOCD.unpack_from(tail, pos)
    directory_end = base + pos
    locator = base + pos - _LOCATOR.size
    if locator >= 0:
        raw = reader.read_at(locator, _LOCATOR.size)
        sig, _disk, eocd64_offset, _disks = _LOCATOR.unpack(raw)
        if sig == b"PK\x06\x07":
            record = reader.read_at(eocd64_offset, _EOCD64.size)
            fields = _EOCD64.unpack(record)
            if fields[0] != b"PK\x06\x06":
                raise ZipReadError("bad ZIP64 end-of-central-directory record")
            count, cd_size, cd_offset = fields[7], fields[8], fields[9]
            directory_end = eocd64_offset
    if cd_offset + cd_size != directory_end:
        raise ZipReadError("the central directory is not where the zip says it is")
    return cd_offset, directory_end, count


def _parse_entries(data: bytes, start: int, end: int) -> list[Entry] | None:
    """Entries in ``data[start:end]``; None unless they chain exactly to ``end``."""
    found = _parse_some(data, start, end, b"")
    return None if found is None else found[0]


def _parse_some(data: bytes, start: int, end: int,
                contains: bytes) -> tuple[list[Entry], int] | None:
    """The entries in ``data[start:end]`` whose raw name holds ``contains``
    (the others are counted, not made: a wheel of 20,000 files whose few
    libraries are wanted), and how many there are in all; None unless they
    chain exactly to ``end``."""
    entries = []
    count = 0
    pos = start
    while pos < end:
        if pos + _CENTRAL.size > end or data[pos : pos + 4] != b"PK\x01\x02":
            return None
        fields = _CENTRAL.unpack_from(data, pos)
        name_len, extra_len, comment_len = fields[10], fields[11], fields[12]
        name_end = pos + _CENTRAL.size + name_len
        count += 1
        if contains and data.find(contains, pos + _CENTRAL.size, name_end) < 0:
            pos = name_end + extra_len + comment_len
            continue
        flags, method, crc = fields[3], fields[4], fields[7]
        csize, usize = fields[8], fields[9]
        offset = fields[16]
        extra = data[name_end : name_end + extra_len]
        usize, csize, offset = _zip64_sizes(extra, usize, csize, offset)
        raw_name = data[pos + _CENTRAL.size : name_end]
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", "replace")
        entries.append(
            Entry(
                name=name,
                flags=flags,
                method=method,
                crc=crc,
                compressed_size=csize,
                header_offset=offset,
                extra_len=extra_len,
                size=usize,
            )
        )
        pos = name_end + extra_len + comment_len
    return (entries, count) if pos == end else None


def _zip64_sizes(
    extra: bytes, usize: int, csize: int, offset: int
) -> tuple[int, int, int]:
    """Sizes and header offset, from the ZIP64 extra field when needed."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == 0x0001:
            values = iter(struct.unpack_from(f"<{length // 8}Q", extra, pos + 4))
            if usize == 0xFFFFFFFF:
                usize = next(values, usize)
            if csize == 0xFFFFFFFF:
                csize = next(values, csize)
            if offset == 0xFFFFFFFF:
                offset = next(values, offset)
            break
        pos += 4 + length
    return usize, csize, offset


def _metadata_entries(window: bytes) -> list[Entry]:
    """The ``*.dist-info/METADATA`` entries of a piece of central directory,
    found by their name, without parsing the (thousands of) other entries."""
    found: list[Entry] = []
    hit = window.find(_METADATA_SUFFIX)
    while hit >= 0:
        name_end = hit + len(_METADATA_SUFFIX)
        pos = window.rfind(b"PK\x01\x02", max(hit - _MAX_NAME, 0), hit)
        while pos >= 0:
            if pos + _CENTRAL.size <= hit and (
                pos + _CENTRAL.size + _CENTRAL.unpack_from(window, pos)[10] == name_end
            ):
                entry_end = _entry_end(window, pos)
                entries = (_parse_entries(window, pos, entry_end)
                           if entry_end <= len(window) else None)
                found.extend(entries or ())
                break
            pos = window.rfind(b"PK\x01\x02", max(hit - _MAX_NAME, 0), pos)
        hit = window.find(_METADATA_SUFFIX, name_end)
    return found


def _entry_end(window: bytes, pos: int) -> int:
    """Where the central-directory entry at ``pos`` ends (past ``window`` if cut)."""
    fields = _CENTRAL.unpack_from(window, pos)
    return int(pos + _CENTRAL.size + fields[10] + fields[11] + fields[12])


def _tail_entries(reader: RangeReader, start: int, end: int) -> list[Entry]:
    """The central-directory entries readable from the cached tail alone: the
    METADATA ones by name when there are any, else all that chain to the end."""
    window_start = max(start, reader.tail_start)
    window = reader.read_at(window_start, end - window_start)
    named = _metadata_entries(window)
    if named:
        return named
    if window_start == start:
        return _parse_entries(window, 0, len(window)) or []
    pos = window.find(b"PK\x01\x02")
    while pos >= 0:
        entries = _parse_entries(window, pos, len(window))
        if entries is not None:
            return entries
        pos = window.find(b"PK\x01\x02", pos + 1)
    return []


def pick_metadata(names: Iterable[str], filename: str) -> str:
    """The ``<name>-<version>.dist-info/METADATA`` member of the wheel ``filename``."""
    wheel_name = parse_wheel_filename(filename)[0]
    found = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    mine = [
        n
        for n in found
        if canonicalize_name(n.split("/")[0].removesuffix(".dist-info").split("-")[0])
        == wheel_name
    ]
    if len(mine) == 1:
        return mine[0]
    if not mine and len(found) == 1:
        return found[0]  # a misnamed directory: the name check reports it
    raise ZipReadError(
        f"expected one *.dist-info/METADATA for {wheel_name}, found {found or 'none'}"
    )


def read_dist_info_metadata(reader: RangeReader, filename: str) -> bytes:
    """The bytes of the wheel's METADATA member, read through ``reader``."""
    return read_dist_info(reader, filename)[0]


def read_dist_info(reader: RangeReader, filename: str, *, listing: bool = False,
                   contains: bytes = b"") -> tuple[bytes, list[Entry] | None]:
    """The bytes of the wheel's METADATA member and, with ``listing``, what
    :func:`read_entries` would give when the tail already read holds the whole
    central directory (else None): parsed from the directory's real start,
    chained exactly to its end, as many entries as the end record says. The
    native check then lists the wheel's files without a request of its own.
    ``contains``: only the entries whose name holds it are listed."""
    start, end, count = _directory_bounds(reader)
    held = _held_entries(reader, start, end, count, contains) if listing else None
    return _read_metadata(reader, filename, start, end), held


def _held_entries(reader: RangeReader, start: int, end: int,
                  count: int, contains: bytes) -> list[Entry] | None:
    directory = reader.held(start, end - start)
    if directory is None:
        return None
    found = _parse_some(directory, 0, len(directory), contains)
    return found[0] if found is not None and found[1] == count else None


def _read_metadata(reader: RangeReader, filename: str, start: int,
                   end: int) -> bytes:
    entries = _tail_entries(reader, start, end)
    try:
        name = pick_metadata((e.name for e in entries), filename)
    except ZipReadError:
        entries = read_entries(reader)
        name = pick_metadata((e.name for e in entries), filename)
    entry = next(e for e in entries if e.name == name)
    return _read_member(reader, entry, limit=MAX_METADATA_BYTES)


def read_entries(reader: RangeReader, *, contains: bytes = b"") -> list[Entry]:
    """Every entry of the central directory (read whole: listing a wheel's
    files); with ``contains``, only those whose name holds it."""
    start, end, count = _directory_bounds(reader)
    directory = reader.read_at(start, end - start)
    entries, found = _parse_some(directory, 0, len(directory), contains) or ([], 0)
    if found != count:
        raise ZipReadError(
            f"central directory has {found} entries, expected {count}"
        )
    return entries


def iter_member(
    reader: RangeReader, entry: Entry, *, chunk_size: int = 8 << 20
) -> Iterator[bytes]:
    """The uncompressed bytes of ``entry`` in pieces, fetched ``chunk_size``
    compressed bytes at a time and never cached: a caller that stops early reads
    (and pays for) only the part of the member before the point it stopped."""
    start = data_start(reader, entry, prefetch=0)
    inflater = isal_zlib.decompressobj(-15) if entry.method == 8 else None
    if entry.method not in (0, 8):
        raise ZipReadError(f"{entry.name}: unsupported compression {entry.method}")
    done = 0
    while done < entry.compressed_size:
        length = min(chunk_size, entry.compressed_size - done)
        piece = reader.fetch(start + done, length)
        done += length
        if inflater is None:
            yield piece
            continue
        try:
            # inflated in slices of the fetched bytes (no copy): pieces of ~1 MB
            # that the allocator hands out again once dropped, instead of a
            # fresh 32 MB mapping, faulted in page by page, for each fetch
            view = memoryview(piece)
            for at in range(0, len(view), _INFLATE_STEP):
                rest: bytes | memoryview = view[at:at + _INFLATE_STEP]
                while rest:
                    yield inflater.decompress(rest, _INFLATED_AT_MOST)
                    rest = inflater.unconsumed_tail
        except BAD_DEFLATE as exc:
            raise ZipReadError(f"{entry.name}: bad deflate data: {exc}") from exc


def data_start(reader: RangeReader, entry: Entry, *, prefetch: int = 0) -> int:
    """Where ``entry``'s data begins, after its local header (read with
    ``prefetch`` more bytes, so a small member usually comes in the same request;
    :func:`local_span` is what that read covers)."""
    if entry.flags & 0x1:
        raise ZipReadError(f"{entry.name} is encrypted")
    head = reader.read_at(*local_span(entry, prefetch))
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        raise ZipReadError(f"no local header for {entry.name}")
    local = _LOCAL.unpack_from(head)
    return int(entry.header_offset + _LOCAL.size + local[9] + local[10])


def local_span(entry: Entry, prefetch: int = 0) -> tuple[int, int]:
    """(offset, length) of what :func:`data_start` reads: the local header as
    the central directory describes it, ``prefetch`` bytes of data and some
    slack (a local extra field may be longer)."""
    guess = guess_data_start(entry) - entry.header_offset
    return entry.header_offset, guess + prefetch + _SLACK


def guess_data_start(entry: Entry) -> int:
    """Where ``entry``'s data begins if its local header has the extra field
    its central one has (:func:`data_start` reads the real one)."""
    return entry.header_offset + _LOCAL.size + len(entry.name.encode()) + \
        entry.extra_len


def prefetch_entries(reader: RangeReader, entries: Iterable[Entry], *,
                     gap: int = 64 << 10, limit: int = 16 << 20) -> None:
    """Read the members ``entries`` into ``reader``'s cache in as few requests
    as their places allow: neighbours less than ``gap`` apart share a request of
    at most ``limit`` bytes (scipy's 111 extension modules: a few requests, not
    111 one after another). :func:`read_entry` then reads them from the cache."""
    for lo, length in prefetch_spans(entries, gap=gap, limit=limit):
        reader.read_at(lo, length)


def prefetch_spans(entries: Iterable[Entry], *, gap: int = 64 << 10,
                   limit: int = 16 << 20) -> list[tuple[int, int]]:
    """The (offset, length) spans :func:`prefetch_entries` reads for ``entries``
    (for a caller that fetches them together with other spans)."""
    spans: list[list[int]] = []
    for e in sorted(entries, key=lambda e: e.header_offset):
        lo = e.header_offset
        hi = lo + _LOCAL.size + len(e.name.encode()) + e.extra_len + \
            e.compressed_size + _SLACK
        if spans and lo - spans[-1][1] <= gap and hi - spans[-1][0] <= limit:
            spans[-1][1] = max(spans[-1][1], hi)
        else:
            spans.append([lo, hi])
    return [(lo, hi - lo) for lo, hi in spans]


def read_entry(reader: RangeReader, entry: Entry, *,
               limit: int | None = None) -> bytes:
    """The uncompressed bytes of ``entry``, CRC-checked, through the cache;
    a directory entry stating more than ``limit`` of them, or a member
    inflating past what its entry states, is a ZipReadError, found without
    inflating the rest."""
    return _read_member(reader, entry, limit=limit)


def _read_member(reader: RangeReader, entry: Entry, *,
                 limit: int | None = None) -> bytes:
    """The member's bytes, inflated to at most the size its directory entry
    states (and ``limit``): a member that inflates past it, a bomb behind an
    honest-looking entry, stops there instead of filling memory."""
    if limit is not None and entry.size > limit:
        raise ZipReadError(f"{entry.name}: more than {limit:,} bytes uncompressed")
    start = data_start(reader, entry, prefetch=entry.compressed_size)
    data = reader.read_at(start, entry.compressed_size)
    if len(data) != entry.compressed_size:
        raise ZipReadError(f"{entry.name} is cut short")
    if entry.method == 0:
        raw = data
    elif entry.method == 8:
        try:
            raw = isal_zlib.decompressobj(-15).decompress(data, entry.size + 1)
        except BAD_DEFLATE as exc:
            raise ZipReadError(f"{entry.name}: bad deflate data: {exc}") from exc
    else:
        raise ZipReadError(f"{entry.name}: unsupported compression {entry.method}")
    if len(raw) != entry.size:
        told = "more" if len(raw) > entry.size else "fewer"
        raise ZipReadError(f"{entry.name}: {told} bytes than the {entry.size:,} "
                           "its directory entry states")
    if isal_zlib.crc32(raw) != entry.crc:
        raise ZipReadError(f"{entry.name}: CRC mismatch")
    return raw


def read_member(
    reader: RangeReader, choose: Callable[[list[str]], str | None]
) -> bytes | None:
    """The bytes of the member ``choose`` picks from every name in the zip (None
    when it picks none). Reads the whole central directory: for small archives
    such as zip sdists, not for wheels."""
    entries = read_entries(reader)
    name = choose([e.name for e in entries])
    if name is None:
        return None
    return _read_member(reader, next(e for e in entries if e.name == name))
