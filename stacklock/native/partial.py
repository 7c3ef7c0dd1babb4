"""A shared object's loader view from three parts of its zip member.

The native check needs of each shared object what the loader reads
(:mod:`stacklock.native.elf`): the ELF and program headers, the dynamic segment,
and the string, hash and symbol tables it points to. A linker puts the tables in
the object's first pages and the dynamic segment after the code and data;
patchelf (auditwheel) moves the string and hash tables, and sometimes the
dynamic segment, to the very end. A zip member is one deflate stream, so a whole
read inflates it from its start to the last of these. This reader takes three
parts instead, each by range requests for just its compressed bytes:

- the **head**, inflated from the start: the ELF and program headers and the
  tables that lie there;
- the **tail**, inflated from a block boundary near the end
  (:mod:`stacklock.native.deflate`) to the member's end. A stream that ends
  exactly where the member does, with the member's size known, places every
  byte; a place that only looked like a boundary does not decode that far;
- the **dynamic segment**, when it lies in the middle: a window inflated from a
  boundary near where the sizes of the sections put it, and placed by what
  every linked object holds: its GOT's first word is the dynamic segment's
  address, and the segment's ``DT_PLTGOT`` says where that word lies (or the GOT
  follows the segment directly).

A byte is used only when it is exact (its value does not depend on the unknown
32 KiB before a boundary: :mod:`stacklock.native.deflate`). The facts are made by
the reader of a whole read (:func:`~stacklock.native.elf.parse_shared_object`)
over an image that holds only exact bytes and refuses any other read. Before
they are taken, what came from the tail must be placed right: the GOT's first
word, read through the tail, is the dynamic segment's address, or the section
headers, read through the tail, agree with the program headers (the dynamic
segment's offset, address and size) and with the dynamic segment (``DT_STRTAB``,
``DT_STRSZ``, ``DT_SYMTAB``, the hash table; the hash table's symbol count with
``.dynsym``'s size). Anything else (no boundary, a byte never exact, a member
not deflated, a segment that cannot be placed, parts that disagree, more than
:data:`_SHARE` of the member) raises :class:`Unavailable`, and the member is
read whole, as before.

:func:`read_member` is a generator: it yields the file spans it will read
next, so that a caller reading many members fetches them together, and returns
the facts (:class:`~stacklock.native.wheel.WheelReader` drives it).
"""

from __future__ import annotations

import bisect
import io
import re
from typing import TYPE_CHECKING

from isal import isal_zlib

from stacklock.metadata import remote_zip
from stacklock.native import deflate
from stacklock.native.elf import (
    DT_GNU_HASH,
    DT_HASH,
    DT_NEEDED,
    DT_PLTGOT,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    ET_DYN,
    Headers,
    Section,
    Segments,
    SharedObject,
    parse_dynamic,
    parse_headers,
    parse_sections,
    parse_segments,
    parse_shared_object,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterable, Iterator

    from stacklock.metadata.ranges import RangeReader

__all__ = ["PARTIAL_MIN", "Unavailable", "read_member", "read_members"]

PARTIAL_MIN = 384 << 10  # compressed bytes under which a member is read whole
_HEAD = 24 << 10  # compressed bytes first read from the start
_TAIL = 96 << 10  # ... and before the end
_SCAN = 192 << 10  # compressed bytes scanned for one boundary at most
# the first window for the dynamic segment: this much before where it is
# guessed to lie (a boundary, and the bytes it decodes to become exact: the
# median distance needed on the objects of a CUDA 13 stack is 76 KB) and after
_LEAD = 96 << 10
_AFTER = 64 << 10
_SHARE = 0.75  # of the member's compressed size a partial read may fetch
_SLACK = 1024  # around a span placed before the local header is read
_GAP = 16 << 10  # spans this close share one request
_SHT_STRTAB, _SHT_RELA, _SHT_HASH, _SHT_DYNAMIC = 3, 4, 5, 6
_SHT_NOBITS, _SHT_DYNSYM, _SHT_GNU_HASH = 8, 11, 0x6FFFFFF6
_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR = 1, 2, 4
_SHT_PROGBITS = 1
_SHT_SYMTAB, _SHT_REL = 2, 9
_DT_SYMENT = 11
_PF_X = 1

Spans = list[tuple[int, int]]  # (file offset, length) to fetch


class Unavailable(Exception):
    """The member cannot be read in part (the message says why): read it whole."""


class _Missing(Exception):
    """A read of ``length`` bytes at ``offset`` that no exact bytes hold."""

    def __init__(self, offset: int, length: int) -> None:
        super().__init__(offset, length)
        self.offset = offset
        self.length = length


class _Piece:
    """Inflated bytes at file offset ``start``: exact from the member's start or
    checked (``source`` None), or decoded from a block boundary with the window
    :data:`~stacklock.native.deflate.FILL` (``source``: the compressed bytes and
    the boundary), decoded again with :data:`~stacklock.native.deflate.OTHER` as
    far as a read needs it."""

    def __init__(self, start: int, out: bytes,
                 source: tuple[bytes, deflate.Start] | None = None) -> None:
        self.start = start
        self.out = out
        self.source = source
        self._other = b""

    @property
    def end(self) -> int:
        return self.start + len(self.out)

    def exact(self, offset: int, length: int) -> bytes | None:
        """The bytes at ``offset`` when all of them are exact, else None (also,
        without a second decode, where the fill is more than one byte in 64:
        not likely to be all the member's own)."""
        lo = offset - self.start
        if self.source is not None and 0 <= lo and lo + length <= len(self.out) and \
                self.out.count(deflate.FILL, lo, lo + length) * 64 > length:
            return None
        both = self.both(offset, length)
        return None if both is None or both[0] != both[1] else both[0]

    def both(self, offset: int, length: int) -> tuple[bytes, bytes] | None:
        """The bytes at ``offset`` as decoded with each fill (the same bytes
        twice when no fill is in them): where they agree, they are exact. None
        outside the piece."""
        lo = offset - self.start
        hi = lo + length
        if lo < 0 or hi > len(self.out):
            return None
        got = self.out[lo:hi]
        if self.source is None or deflate.FILL not in got:
            return got, got
        if len(self._other) < hi:
            data, start = self.source
            again = deflate.inflate_from(data, start, fill=deflate.OTHER,
                                         limit=max(hi, 2 * len(self._other)))
            self._other = again.out if again is not None else b""
        return got, self._other[lo:hi]


def _agree(later: _Piece, earlier: _Piece) -> bool:
    """Whether ``earlier`` (decoded from a boundary before ``later``'s, both to
    the member's end) holds all of ``later`` and the same byte wherever both
    are exact in their first decode (the fill marks the rest)."""
    if earlier.start > later.start:
        return False
    ours = memoryview(earlier.out)[later.start - earlier.start:]
    theirs = memoryview(later.out)
    if len(ours) != len(theirs):
        return False
    # piece by piece, most of them alike (the fill is where the later one
    # was not exact yet): only those that differ are compared in full
    for at in range(0, len(ours), _AGREE_PIECE):
        a = bytes(ours[at:at + _AGREE_PIECE])
        b = bytes(theirs[at:at + _AGREE_PIECE])
        if a == b:
            continue
        # in C: the bytes that differ where neither is the fill
        differ = int.from_bytes(a, "little") ^ int.from_bytes(b, "little")
        known = int.from_bytes(a.translate(_KNOWN), "little") & \
            int.from_bytes(b.translate(_KNOWN), "little")
        if differ & known:
            return False
    return True


_AGREE_PIECE = 64 << 10
# 0x00 for the fill, 0xFF for any other byte
_KNOWN = bytes(0 if value == deflate.FILL else 0xFF for value in range(256))


class _Exact(io.RawIOBase):
    """A file of ``size`` bytes of which only the pieces added are known; a read
    of anything else raises :class:`_Missing`. ``served`` records which piece
    gave each read."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.pieces: list[_Piece] = []
        self.served: list[_Piece] = []
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}
        self._pos = max(base[whence] + offset, 0)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self._pos + size,
                                                              self.size)
        if end <= self._pos:
            return b""
        found = self.find(self._pos, end - self._pos)
        if found is None:
            raise _Missing(self._pos, end - self._pos)
        self.served.append(found[1])
        self._pos = end
        return found[0]

    def find(self, offset: int, length: int) -> tuple[bytes, _Piece] | None:
        """The ``length`` exact bytes at ``offset`` and the newest piece that has
        them all; None when none has."""
        for piece in reversed(self.pieces):
            got = piece.exact(offset, length)
            if got is not None:
                return got, piece
        return None

    def get(self, offset: int, length: int) -> bytes | None:
        found = self.find(offset, length)
        return None if found is None else found[0]


class _Member:
    """The state of one member's partial read."""

    def __init__(self, source: RangeReader, entry: remote_zip.Entry) -> None:
        self.source = source
        self.entry = entry
        self.csize = entry.compressed_size
        self.usize = entry.size
        self.data = 0  # file offset of the compressed data (0: not read yet)
        self.image = _Exact(self.usize)
        self.asked = 0  # compressed bytes asked for
        self.head = isal_zlib.decompressobj(-15)
        self.head_out = bytearray()
        self.head_in = 0  # compressed bytes fed to the head's inflater
        self.head_piece = _Piece(0, b"")
        self.image.pieces.append(self.head_piece)
        self.tail: _Piece | None = None
        self.tail_from = self.csize  # compressed offset the tail is fetched from
        self.tail_in = self.csize  # ... and decoded from (its boundary)
        self.headers: Headers | None = None
        self.segments: Segments | None = None
        self.sections: _Sections | None = None
        self.window: tuple[int, int] | None = None  # the last window tried
        self.dynamic_at: int | None = None  # where a window saw the segment
        self.short_lead = 0  # the longest distance found too short to be exact

    # -- compressed bytes ---------------------------------------------------

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The file span of compressed bytes [start, end), counted as asked
        (before the local header is read, a little wider: its extra field may
        differ from the central directory's)."""
        start, end = max(start, 0), min(end, self.csize)
        self.asked += max(end - start, 0)
        if self.asked > _SHARE * self.csize:
            raise Unavailable(f"more than {_SHARE:.0%} of the member")
        if self.data:
            return self.data + start, max(end - start, 0)
        guess = remote_zip.guess_data_start(self.entry)
        return guess + start - _SLACK, max(end - start, 0) + 2 * _SLACK

    def compressed(self, start: int, end: int) -> bytes:
        return self.source.read_at(self.data + start, end - start)

    # -- the head -----------------------------------------------------------

    def grow_head(self, fetched: int) -> None:
        """Inflate the head from the start up to compressed ``fetched``."""
        fetched = min(fetched, self.csize)
        if fetched <= self.head_in or self.head.eof:
            return
        piece = self.compressed(self.head_in, fetched)
        self.head_in = fetched
        try:
            out = self.head.decompress(piece, max(self.usize - len(self.head_out), 1))
        except remote_zip.BAD_DEFLATE as exc:
            raise Unavailable(f"bad deflate data: {exc}") from exc
        self.head_out += out
        self.head_piece.out = bytes(self.head_out)

    @property
    def head_used(self) -> int:
        """Compressed bytes the head's output came from."""
        return self.head_in - len(self.head.unconsumed_tail)

    # -- the tail -----------------------------------------------------------

    def take_tail(self) -> bool:
        """Decode the fetched tail from its first block boundary that decodes
        to the member's end; False when none does (fetch more before it)."""
        data = self.compressed(self.tail_from, self.csize)
        for start in deflate.block_starts(data, 0, min(len(data), _SCAN)):
            if self.tail_from + start.bit // 8 >= self.tail_in:
                break  # no earlier than the one had
            if deflate.inflate_from(data, start, probe=True) is None:
                continue
            found = deflate.inflate_from(data, start, limit=self.usize + 1)
            if found is None or not found.eof or found.left or \
                    not 0 < len(found.out) <= self.usize:
                continue
            tail = _Piece(self.usize - len(found.out), found.out, (data, start))
            if self.tail is not None:
                if not _agree(self.tail, tail):
                    # two streams to the end that disagree: one of them
                    # only looked like one (a member built to mislead)
                    raise Unavailable("two boundaries decode to different ends")
                self.image.pieces.remove(self.tail)
            self.tail = tail
            self.tail_in = self.tail_from + start.bit // 8
            self.image.pieces.append(tail)
            return True
        return False

    # -- the object's layout -------------------------------------------------

    def offset(self, address: int) -> int | None:
        """The file offset of ``address`` through the segment that maps it."""
        assert self.segments is not None
        for vaddr, offset, filesz in self.segments.loads:
            if vaddr <= address < vaddr + filesz:
                return offset + address - vaddr
        return None

    def read_sections(self) -> _Sections | None:
        """The section headers, where e_shoff (in the head) puts them, when one
        piece holds them (once it holds them exactly, they are kept)."""
        headers = self.headers
        assert headers is not None
        if self.sections is not None and self.sections.whole:
            return self.sections
        if not headers.shnum or headers.sections_end > self.usize:
            return None
        for piece in reversed(self.image.pieces):
            both = piece.both(headers.shoff, headers.sections_end - headers.shoff)
            if both is not None:
                self.sections = _Sections(parse_sections(both[0], headers),
                                          parse_sections(both[1], headers))
                return self.sections
        return None

    def section_names(self) -> list[bytes]:
        """Each section's name as far as it is decoded: a guess's input only
        (window-dependent letters are the fill), never a fact's."""
        sections, headers = self.sections, self.headers
        assert sections is not None and headers is not None
        table = b""
        if headers.shstrndx < len(sections):
            found = sections.first[headers.shstrndx]
            for piece in self.image.pieces:
                at = found.offset - piece.start
                if 0 <= at and at + found.size <= len(piece.out):
                    table = piece.out[at:at + found.size]
        out = []
        for section in sections.first:
            end = table.find(b"\0", section.name)
            out.append(table[section.name:end] if end >= 0 else b"")
        return out

    def estimate(self, offset: int) -> int:
        """The compressed offset at which the inflated ``offset`` is likely
        reached: measured where the head and the tail are, and between them by
        the sizes of the sections (or segments) weighted by what their kind
        usually deflates to."""
        head_u, head_c = len(self.head_out), self.head_used
        tail_u = self.tail.start if self.tail is not None else self.usize
        tail_c = self.tail_in if self.tail is not None else self.csize
        if offset <= head_u:
            return head_c * offset // max(head_u, 1)
        if offset >= tail_u:
            return tail_c + (self.csize - tail_c) * (offset - tail_u) // \
                max(self.usize - tail_u, 1)
        weigh = self._weights()
        part, whole = weigh(head_u, offset), weigh(head_u, tail_u)
        return head_c + int((tail_c - head_c) * part / max(whole, 1e-9))

    def _weights(self) -> Callable[[int, int], float]:
        if self.sections is not None:
            parts = [(s.offset, s.offset + s.size, _ratio(s, name)) for s, name
                     in zip(self.sections.first, self.section_names(), strict=True)
                     if s.type != _SHT_NOBITS and s.size]
        else:  # the segments: code, and the rest
            assert self.segments is not None
            parts = [(offset, offset + filesz, 0.3) for _v, offset, filesz
                     in self.segments.loads]
        parts.sort()
        starts = [p[0] for p in parts]

        def weigh(lo: int, hi: int) -> float:
            total, covered = 0.0, 0
            first = max(bisect.bisect_right(starts, lo) - 1, 0)
            for start, end, ratio in parts[first:]:
                if start >= hi:
                    break
                overlap = min(hi, end) - max(lo, start)
                if overlap > 0:
                    total += overlap * ratio
                    covered += overlap
            return total + max(hi - lo - covered, 0) * 0.25  # gaps: padding

        return weigh


class _Sections:
    """Section headers as decoded with each fill: a field is exact where the two
    agree (:meth:`field` is None where not)."""

    def __init__(self, first: list[Section], second: list[Section]) -> None:
        self.first = first
        self.second = second
        self.whole = first == second

    def __len__(self) -> int:
        return len(self.first)

    def field(self, index: int, name: str) -> int | None:
        value: int = getattr(self.first[index], name)
        return value if value == getattr(self.second[index], name) else None

    def of_type(self, kind: int) -> list[int] | None:
        """The indices of the sections of type ``kind``; None when a type is not
        exact."""
        types = [self.field(i, "type") for i in range(len(self))]
        return None if None in types else [i for i, t in enumerate(types) if t == kind]


def _ratio(section: Section, name: bytes) -> float:
    """What a section of this kind usually deflates to: fitted on the 93
    objects of a CUDA 13 stack whose dynamic segment lies between a 24 KiB head
    and a 40 KiB tail (the guess then misses by 1.2 % of the member in the
    median, 5.7 % at the 90th percentile, against 3.8 % and 10 % in proportion
    to the inflated offset). CUDA fat binaries are mostly compressed already."""
    if b"fat" in name:  # .nv_fatbin, __nv_relfatbin (letters may be unknown)
        return 0.9
    if section.flags & _SHF_EXECINSTR:
        return 0.42
    if section.type in (_SHT_STRTAB, _SHT_RELA, _SHT_REL, _SHT_SYMTAB, _SHT_DYNSYM):
        return {_SHT_STRTAB: 0.12, _SHT_RELA: 0.18, _SHT_REL: 0.18}.get(
            section.type, 0.29)
    return 0.15 if section.flags & _SHF_ALLOC else 0.25


def read_member(source: RangeReader, entry: remote_zip.Entry,
                ) -> Generator[Spans, None, SharedObject | None]:
    """The facts of the shared object in ``entry`` (None: not one), from its
    head, tail and dynamic segment. Yields the spans it reads next (fetch
    them through ``source``, then resume it); raises :class:`Unavailable` when
    the member must be read whole."""
    if entry.method != 8:
        raise Unavailable("not deflated")
    member = _Member(source, entry)
    yield [remote_zip.local_span(entry, _HEAD),
           member.span(member.csize - _TAIL, member.csize)]
    member.asked += _HEAD
    member.data = remote_zip.data_start(source, entry)
    member.grow_head(_HEAD)
    member.tail_from = max(member.csize - _TAIL, 0)
    headers = parse_headers(bytes(member.head_out[:64]))
    if headers is None or headers.e_type != ET_DYN:
        return _parse(member.image, entry.name)  # not a shared object: the head says
    member.headers = headers
    member.take_tail()
    while True:
        member.image.served.clear()
        try:
            if member.segments is None:
                member.segments = parse_segments(
                    _need(member, headers.phoff, headers.phentsize * headers.phnum),
                    headers)
            # the reads vouched for before the symbols are made (the costly part)
            found = _parse(member.image, entry.name,
                           lambda tags, count: _vouch(member, tags, count))
        except _Missing as missing:
            yield from _fetch_more(member, missing)
            continue
        return found


def _vouch(member: _Member, tags: list[tuple[int, int]], count: int | None) -> None:
    """Raise :class:`_Missing` for the section headers unless the reads so far
    are placed right (:func:`_vouched`)."""
    if not _vouched(member, tags, count):
        headers = member.headers
        assert headers is not None
        raise _Missing(headers.shoff, headers.sections_end - headers.shoff)


def read_members(source: RangeReader, entries: list[remote_zip.Entry], *,
                 alongside: Iterable[tuple[int, int]] = (),
                 ) -> dict[str, SharedObject | Unavailable | None]:
    """:func:`read_member` for each of ``entries`` (members of the one file
    ``source`` reads), the spans all ask for in a round fetched together (a
    request each, neighbours less than ``_GAP`` apart sharing one), and
    ``alongside`` (other spans of the file the caller will read) with the
    first round: each member's facts, or the :class:`Unavailable` that says to
    read it whole."""
    out: dict[str, SharedObject | Unavailable | None] = {}
    running = {e.name: read_member(source, e) for e in entries}
    asked: dict[str, Spans] = {}

    def advance(name: str, step: Callable[[], Spans]) -> None:
        try:
            asked[name] = step()
        except StopIteration as done:
            out[name] = done.value
        except Unavailable as exc:
            out[name] = exc

    for name, member in running.items():
        advance(name, lambda m=member: next(m))  # type: ignore[misc]
    first = list(alongside)
    while asked or first:
        wants = sorted([*first, *(span for spans in asked.values() for span in spans)])
        first = []
        merged: list[list[int]] = []
        for at, length in wants:
            if merged and at - merged[-1][1] <= _GAP:
                merged[-1][1] = max(merged[-1][1], at + length)
            else:
                merged.append([at, at + length])
        for lo, hi in merged:
            source.read_at(lo, hi - lo)
        names, asked = list(asked), {}
        for name in names:
            advance(name, lambda m=running[name]: m.send(None))  # type: ignore[misc]
    return out


def _need(member: _Member, offset: int, length: int) -> bytes:
    got = member.image.get(offset, length)
    if got is None:
        raise _Missing(offset, length)
    return got


def _parse(image: _Exact, path: str,
           seen: Callable[[list[tuple[int, int]], int | None], None] | None = None,
           ) -> SharedObject | None:
    try:
        return parse_shared_object(image, path=path, seen=seen)
    except ValueError as exc:  # what a whole read says: let it say it
        raise Unavailable(f"not readable in part: {exc}") from exc


def _fetch_more(member: _Member, missing: _Missing) -> Iterator[Spans]:
    """Fetch and decode what ``missing`` needs, the way likely to cost the
    fewest bytes: the head further (always exact, from the start), the tail
    from further back, or a window for the dynamic segment. A range is exact
    from a boundary far enough before it (the lead: 76 KB in the median, some
    MB at worst), and each lead found too short doubles the next."""
    segments = member.segments
    lo, hi = missing.offset, missing.offset + missing.length
    tail = member.tail
    if member.headers is not None and len(member.head_out) < lo and \
            (tail is None or lo < tail.start):
        member.read_sections()  # between head and tail: their sizes guess better
    dynamic = segments is not None and segments.dynamic is not None and \
        lo == segments.dynamic[0]
    at = member.dynamic_at if dynamic and member.dynamic_at is not None else \
        member.estimate(lo)
    length = max(member.estimate(hi) - member.estimate(lo), 0)
    if tail is not None and tail.start <= lo:
        # placed, but not exact: the tail's lead was too short
        member.short_lead = max(member.short_lead, at - member.tail_in)
    # a lead found too short doubles; a first one is the median's
    lead = max(2 * member.short_lead, _LEAD if member.short_lead == 0 else 16384)
    costs = {"head": (at + length) * 9 // 8 + 8192 - member.head_in,
             "tail": member.tail_from - (at - lead)}
    if dynamic and _anchorable(member):
        costs["window"] = _window_cost(member, at, max(lead, _LEAD))
    if at - lead <= member.head_in:
        choice = "head"  # as far back as the head: read on from the start
    else:
        choice = min(costs, key=lambda k: costs[k])
    headers = member.headers
    assert headers is not None
    if choice == "window" and member.read_sections() is None and headers.shnum \
            and len(member.head_out) < headers.shoff:
        # the section headers first: their sizes place the window far better,
        # and they say whether a GOT can anchor it
        choice = "sections"
    spans: Spans = []
    fetch_head, tail_from, window = 0, None, None
    if choice == "head":
        fetch_head = max(member.head_in + costs["head"], 2 * member.head_in)
        spans.append(member.span(member.head_in, fetch_head))
    elif choice in ("tail", "sections"):
        tail_from = at - lead if choice == "tail" else \
            member.estimate(headers.shoff) - _TAIL
        # at least twice as far from the end as before: a tail is decoded again
        # whole each time, so its decodes add up to twice the last at most
        tail_from = max(min(tail_from, 2 * member.tail_from - member.csize), 0)
        if tail_from >= member.tail_from:
            raise Unavailable(f"bytes {lo}-{hi} are never exact")
        spans.append(member.span(tail_from, member.tail_from))
    else:
        lead = max(lead, _LEAD)
        window = _next_window(member, at, lead)
        if member.window is not None and member.window[0] <= window[0] and \
                window[1] <= member.window[1]:
            member.dynamic_at = None  # the segment was not where it seemed
            window = _next_window(member, member.estimate(lo), lead)
        last = member.window or (window[1], window[1])
        spans.append(member.span(window[0], min(last[0], window[1])))
        spans.append(member.span(max(last[1], window[0]), window[1]))
        member.window = window
    spans = [s for s in spans if s[1] > 0]
    if not spans:
        raise Unavailable(f"bytes {lo}-{hi} are never exact")
    yield spans
    if fetch_head:
        member.grow_head(fetch_head)
    if tail_from is not None:
        member.tail_from = tail_from
        if not member.take_tail() and member.tail is None:
            raise Unavailable("no block boundary decodes to the member's end")
    if window is not None:
        _anchor(member, *window)


def _anchorable(member: _Member) -> bool:
    """Whether a window can place the dynamic segment: a GOT follows it (not
    so where patchelf moved the segment to the end, beside the string table)."""
    if member.sections is None or member.segments is None or \
            member.segments.dynamic is None:
        return True
    dyn = member.segments.dynamic[0]
    after = [s for s in member.sections.first if s.offset > dyn and s.size and
             s.type != _SHT_NOBITS]
    if not after:
        return False
    first = min(after, key=lambda s: s.offset)
    return first.type == _SHT_PROGBITS and bool(first.flags & _SHF_WRITE)


def _window_cost(member: _Member, at: int, lead: int) -> int:
    """The compressed bytes the next window would fetch (:func:`_next_window`)."""
    window = member.window
    if window is None or not window[0] <= at < window[1]:
        return lead + _AFTER
    if member.dynamic_at is not None:
        return max(window[0] - (at - lead), 0) + max(at + _AFTER - window[1], 0)
    return 2 * (window[1] - window[0])


def _next_window(member: _Member, at: int, lead: int) -> tuple[int, int]:
    """The next window for the dynamic segment, guessed to lie at compressed
    ``at``: ``lead`` before it to ``_AFTER`` after it; once a window saw the
    segment, the same (the lead grows); a window that did not see it, three
    times as wide."""
    window = member.window
    if window is None or not window[0] <= at < window[1] or \
            member.dynamic_at is not None:
        lo, hi = at - lead, at + _AFTER
        if window is not None and window[0] <= at < window[1]:
            lo, hi = min(lo, window[0]), max(hi, window[1])
    else:
        width = window[1] - window[0]
        lo, hi = window[0] - width, window[1] + width
    return max(lo, 0), min(hi, member.csize)


def _anchor(member: _Member, lo: int, hi: int) -> None:
    """Place the dynamic segment from a window of compressed [lo, hi): decode it
    from its first boundary that decodes through it, find each exact word that
    is the segment's address (the GOT's first), and keep the segment when
    exactly one placement gives a dynamic segment that holds together. When the
    address is there but not exact (or the segment is not), note where it was
    seen: the next window starts further before it."""
    assert member.segments is not None and member.headers is not None
    assert member.segments.dynamic is not None
    dyn, size, address = member.segments.dynamic
    word = member.headers.address
    anchor = word.pack(address)
    pltgot = word.pack(DT_PLTGOT)
    data = member.compressed(lo, hi)
    for start in deflate.block_starts(data, 0, min(len(data), _SCAN)):
        if deflate.inflate_from(data, start, probe=True) is None:
            continue
        found = deflate.inflate_from(data, start, limit=member.usize, every=4096)
        if found is None or not _through(found, start, data, hi == member.csize):
            continue
        piece = _Piece(0, found.out, (data, start))
        placed: set[bytes] = set()
        got = _find_word(found.out, anchor)
        while got >= 0:
            # the GOT right after the segment, or where its DT_PLTGOT says (a
            # DT_PLTGOT tag within the segment's size before that place)
            starts = [got - size]
            for gap in _got_gaps(member, found.out, got, pltgot):
                starts.append(got - gap)
            for at in starts:
                region = piece.exact(at, size) if at >= 0 else None
                if region is not None and piece.exact(got, word.size) is not None \
                        and _holds_together(member, region):
                    placed.add(region)
            got = _find_word(found.out, anchor, got + 1)
        if len(placed) == 1:
            member.image.pieces.append(_Piece(dyn, placed.pop()))
            return
        guess = member.estimate(dyn)
        near = max(member.csize // 12, 256 << 10)  # a guess misses by less
        seen = min(((lo + next((c for c, u in found.points if u >= hit.start()),
                                len(data))) for hit in
                    _blurred(anchor).finditer(found.out)),
                   key=lambda c: abs(c - guess), default=None)
        if seen is not None and abs(seen - guess) < near:
            member.dynamic_at = seen
            member.short_lead = max(member.short_lead,
                                    member.dynamic_at - lo - start.bit // 8)
        return  # a boundary that decodes through the window: this is its content


def _find_word(out: bytes, word: bytes, start: int = 0) -> int:
    """``out.find(word, start)``, searched for by the word's bytes but its
    zeros: an address's high bytes are zeros, as common in code and data as
    any byte, and a search for the whole word crawls through them (on the
    windows of a CUDA 13 stack's lock, 0.03 s of the check's CPU)."""
    core = word.strip(b"\0")
    if not core:
        return out.find(word, start)
    lead = word.index(core)
    at = out.find(core, start + lead)
    while at >= 0 and not out.startswith(word, at - lead):
        at = out.find(core, at + 1)
    return at - lead if at >= 0 else -1


def _through(found: deflate.Inflated, start: deflate.Start, data: bytes,
             last: bool) -> bool:
    """Whether a decode of a window from ``start`` went through it as a real
    block start's does: a stream does not end before the member does (``last``:
    the window reaches its end), and a stored block ends inside the window. A
    place that only looks like a stored block's length decodes through any
    window its length runs past: on the members of a CUDA 13 stack, 10 of
    1,482 windows had such a place, or a stream ending early, as their first
    start that decoded, none once these are passed over."""
    if found.eof and (found.left or not last):
        return False
    if start.stored:
        at = start.bit // 8
        return at + 4 + int.from_bytes(data[at:at + 2], "little") <= len(data)
    return True


def _got_gaps(member: _Member, out: bytes, got: int, pltgot: bytes) -> set[int]:
    """How far before the GOT word at ``got`` in ``out`` the dynamic segment may
    start: where the section headers put the GOT (when known), or where a
    DT_PLTGOT tag before it says."""
    assert member.segments is not None and member.headers is not None
    assert member.segments.dynamic is not None
    dyn, size, _address = member.segments.dynamic
    word = member.headers.address
    if member.sections is not None:
        return {s.offset - dyn for s in member.sections.first
                if s.type == _SHT_PROGBITS and s.flags & _SHF_WRITE
                and dyn < s.offset and s.size}
    gaps = set()
    tag = out.find(pltgot, max(got - (1 << 20), 0), got)
    while tag >= 0:
        where = member.offset(word.unpack_from(out, tag + word.size)[0])
        if where is not None and 0 <= got - (where - dyn) <= tag < \
                got - (where - dyn) + size and \
                (tag - got + where - dyn) % (2 * word.size) == 0:
            gaps.add(where - dyn)
        tag = out.find(pltgot, tag + 1, got)
    return gaps


def _blurred(value: bytes) -> re.Pattern[bytes]:
    """``value`` where each zero byte may also be the fill: the zeros of an
    address are what window-dependent copies carry the longest, its own bytes
    are literals sooner."""
    fill = re.escape(bytes([deflate.FILL]))
    parts = [b"[\x00" + fill + b"]" if byte == 0 else re.escape(bytes([byte]))
             for byte in value]
    return re.compile(b"".join(parts))


def _holds_together(member: _Member, region: bytes) -> bool:
    """Whether ``region`` read as the dynamic segment ends in DT_NULL padding,
    names its tables inside the loaded segments and its names inside its string
    table (and agrees with the section headers, when they are known)."""
    headers = member.headers
    assert headers is not None
    tags = parse_dynamic(region, headers)
    entry = headers.layout.dynamic.size
    if any(region[len(tags) * entry:]):
        return False  # not DT_NULL to the end
    first: dict[int, int] = {}
    for tag, value in tags:
        first.setdefault(tag, value)
    needed = (DT_STRTAB, DT_STRSZ, DT_SYMTAB)
    if any(t not in first for t in needed) or not {DT_GNU_HASH, DT_HASH} & first.keys():
        return False
    for tag in (DT_STRTAB, DT_SYMTAB, DT_GNU_HASH, DT_HASH):
        if tag in first and member.offset(first[tag]) is None:
            return False
    if first.get(_DT_SYMENT, headers.symbol_size) != headers.symbol_size:
        return False
    strsz = first[DT_STRSZ]
    if not all(value < strsz for tag, value in tags
               if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH)):
        return False
    sections = member.sections
    return sections is None or _sections_agree(sections, member, tags, None)


def _vouched(member: _Member, tags: list[tuple[int, int]], count: int | None) -> bool:
    """Whether the bytes the reads took from the tail are placed right: the
    GOT's first word, read there, is the dynamic segment's address, or the
    section headers, read there, agree with the head and the dynamic segment.
    Reads from the head need nothing; a dynamic segment from a window was
    placed by its own anchor (:func:`_anchor`)."""
    if member.tail is None or member.tail not in member.image.served:
        return True
    assert member.segments is not None and member.headers is not None
    assert member.segments.dynamic is not None
    dyn, size, address = member.segments.dynamic
    word = member.headers.address
    first = dict(reversed(tags))
    places = [dyn + size]
    if DT_PLTGOT in first:
        places.append(member.offset(first[DT_PLTGOT]) or -1)
    for place in places:
        if 0 <= place and member.tail.exact(place, word.size) == word.pack(address):
            return True
    sections = member.read_sections()
    return sections is not None and _sections_agree(sections, member, tags, count)


def _sections_agree(sections: _Sections, member: _Member,
                    tags: list[tuple[int, int]], count: int | None) -> bool:
    """Whether the section headers (each field used exact) describe the dynamic
    segment the program headers do, and the tables its tags name (the hash
    table's count is ``.dynsym``'s size), and each loaded section with
    contents lies where a ``PT_LOAD`` maps its address (so on all 618 objects
    of a CUDA 13 stack)."""
    assert member.segments is not None and member.headers is not None
    dyn, size, address = member.segments.dynamic or (0, 0, 0)
    if not _mapped(sections, member.segments.loads):
        return False
    dynamics = sections.of_type(_SHT_DYNAMIC)
    dynsyms = sections.of_type(_SHT_DYNSYM)
    hashes = [(i, t) for t in (_SHT_GNU_HASH, _SHT_HASH)
              for i in sections.of_type(t) or ()]
    if dynamics is None or dynsyms is None or len(dynamics) != 1 or \
            len(dynsyms) != 1:
        return False
    field = sections.field
    if (field(dynamics[0], "offset"), field(dynamics[0], "size"),
            field(dynamics[0], "addr")) != (dyn, size, address):
        return False
    link = field(dynsyms[0], "link")
    if link is None or link >= len(sections):
        return False
    first = dict(reversed(tags))
    if (first.get(DT_STRTAB), first.get(DT_STRSZ), first.get(DT_SYMTAB)) != \
            (field(link, "addr"), field(link, "size"), field(dynsyms[0], "addr")):
        return False
    named = {(tag, first[tag]) for tag in (DT_GNU_HASH, DT_HASH) if tag in first}
    if named != {(DT_GNU_HASH if kind == _SHT_GNU_HASH else DT_HASH,
                  field(i, "addr")) for i, kind in hashes}:
        return False
    if count is None:
        return True
    entsize, total = field(dynsyms[0], "entsize"), field(dynsyms[0], "size")
    return entsize == member.headers.symbol_size and total is not None and \
        count == total // entsize


def _mapped(sections: _Sections, loads: tuple[tuple[int, int, int], ...]) -> bool:
    """Whether each allocated section with contents (its fields exact) lies in
    a ``PT_LOAD`` (p_vaddr, p_offset, p_filesz) that maps it at its address."""
    field = sections.field
    for i in range(len(sections)):
        flags, kind = field(i, "flags"), field(i, "type")
        if flags is None or kind is None or not flags & _SHF_ALLOC or \
                kind == _SHT_NOBITS:
            continue
        addr, offset, size = field(i, "addr"), field(i, "offset"), field(i, "size")
        if addr is None or offset is None or size is None:
            return False
        if size and not any(vaddr <= addr and addr + size <= vaddr + filesz and
                            offset - start == addr - vaddr
                            for vaddr, start, filesz in loads):
            return False
    return True
