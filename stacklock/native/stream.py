"""A seekable file over a zip member that is inflated only as far as it is read.

The ELF reader (:mod:`stacklock.native.elf`) wants a seekable file. A shared
object in a wheel is a deflate stream, which can only be read forwards, and some
are 1 GB once inflated. This file pulls inflated pieces from an iterator when a
read reaches past what it has, and keeps the pieces it may be asked for again
as they came (no copy), in memory up to :data:`_SPOOL` bytes and in a temporary
file beyond, so a read can go back without inflating again and memory stays
small. Reads that never reach the end of the member leave the rest unfetched:
:attr:`InflatedMember.inflated` says how far it went.

A shared object's loader view is its first pages and, in most large libraries,
its last ones (the dynamic section and ``.dynstr`` after patchelf). What lies
between is inflated without being kept:

- with ``skip``, the first forward jump of more than :data:`_SKIP` past what is
  inflated; after :meth:`InflatedMember.keep_until` (the ELF reader: where its
  first loaded segment ends, the symbol tables lying before it), the first jump
  of more than :data:`_HINTED_SKIP` past that point, but for its last
  :data:`_MARGIN` (patchelf puts the tables it rewrites there);
- after :meth:`InflatedMember.reads_at` (the ELF reader, once it has the dynamic
  segment: where each table it will read begins), everything up to the nearest
  of those places still ahead: libtorch_cpu's 92 MB between its dynamic segment
  and the tables patchelf moved to its end.

A later read in a dropped part raises :class:`Discarded`; the caller reads the
member again, keeping all.
"""

from __future__ import annotations

import bisect
import io
import tempfile
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["Discarded", "InflatedMember", "SpillFailed"]

_SPOOL = 32 << 20  # kept bytes held in memory; more goes to a temporary file
_SKIP = 16 << 20  # a forward jump this long is inflated without being kept
_HINTED_SKIP = 1 << 20  # the same, past where keep_until said reads come back
# kept before the target of such a jump: patchelf (auditwheel) puts the tables
# it rewrites just before the dynamic segment (numpy's, scipy's OpenBLAS: up
# to 1 MB before it)
_MARGIN = 4 << 20

Piece = bytes | memoryview


class Discarded(Exception):
    """A read fell in the part of the member inflated without being kept."""


class SpillFailed(OSError):
    """The temporary folder refused kept bytes (a full disk): the machine's
    error, not the member's; ``filename`` is the folder."""


class InflatedMember(io.RawIOBase):
    """Read-only, seekable view of ``size`` bytes produced by ``chunks``."""

    def __init__(self, chunks: Iterator[Piece], *, size: int,
                 skip: bool = False, keep_until: int | None = None) -> None:
        super().__init__()
        self._chunks = chunks
        self._size = size
        self._pos = 0
        self.inflated = 0
        self._skip = skip
        self._jumped = False  # the one guessed gap is made
        self._keep_until = keep_until  # with skip: see keep_until()
        self._leftover: Piece = b""
        # kept pieces, by the offset each starts at: (its bytes, 0, length) in
        # memory or (None, where it starts in the spill file, length)
        self._starts: list[int] = []
        self._kept: list[tuple[Piece | None, int, int]] = []
        self._in_memory = 0
        self._spill: IO[bytes] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}
        self._pos = max(base[whence] + offset, 0)
        return self._pos

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        end = min(self._pos + len(buffer), self._size)
        if end <= self._pos:
            return 0
        if self._skip and not self._jumped:
            self._guess_gap()
        self._inflate_to(end)
        end = min(end, self.inflated)  # a member shorter than its directory said
        out = memoryview(buffer)
        done, at = 0, self._pos
        index = bisect.bisect_right(self._starts, at) - 1
        while at < end:
            if index < 0 or index >= len(self._kept) or \
                    not self._starts[index] <= at < self._starts[index] + \
                    self._kept[index][2]:
                raise Discarded(f"bytes {at}-{end} were not kept")
            start, (data, spilled, length) = self._starts[index], self._kept[index]
            take = min(end, start + length) - at
            if data is not None:
                out[done:done + take] = data[at - start:at - start + take]
            else:
                assert self._spill is not None
                self._spill.seek(spilled + at - start)
                out[done:done + take] = self._spill.read(take)
            done += take
            at += take
            index += 1
        self._pos = at
        return done

    def close(self) -> None:
        self._starts, self._kept = [], []
        if self._spill is not None:
            self._spill.close()
        super().close()

    @property
    def kept_bytes(self) -> int:
        """Inflated bytes kept to be read again (the rest was dropped)."""
        return sum(length for _data, _at, length in self._kept)

    def keep_until(self, offset: int) -> None:
        """Reads will come back to ``[0, offset)`` only (with ``skip``)."""
        self._keep_until = offset

    def reads_at(self, offsets: Iterable[int]) -> None:
        """The reads left each begin at one of ``offsets`` (and read on from
        there): what lies between what is inflated and the nearest of them still
        ahead is inflated without being kept, unless a read begins just behind
        what is inflated (it may run on past it)."""
        offsets = tuple(offsets)
        ahead = [offset for offset in offsets if offset > self.inflated]
        if ahead and not any(0 <= self.inflated - offset < _HINTED_SKIP
                             for offset in offsets):
            # no further than the member's end (a broken table's offset: its
            # read fails; what a bomb would inflate past is not asked for)
            self._drop_to(min(*ahead, self._size))

    def _guess_gap(self) -> None:
        """The one gap made without the reader saying where its reads are."""
        if self._keep_until is not None:
            if self._pos - max(self.inflated, self._keep_until) > \
                    _HINTED_SKIP + _MARGIN:
                self._inflate_to(min(self._keep_until, self._pos))
                self._drop_to(self._pos - _MARGIN)
        elif self._pos - self.inflated > _SKIP:
            self._drop_to(self._pos)

    def _drop_to(self, start: int) -> None:
        """Inflate up to ``start`` without keeping it."""
        self._jumped = True
        for piece in self._pieces():
            if self.inflated + len(piece) > start:
                self._leftover = memoryview(piece)[start - self.inflated:]
                self.inflated = start
                return
            self.inflated += len(piece)
        self._size = self.inflated  # shorter than the directory said

    def _pieces(self) -> Iterator[Piece]:
        if self._leftover:
            piece, self._leftover = self._leftover, b""
            yield piece
        for piece in self._chunks:  # not ``yield from``: closing this must
            yield piece             # not close the chunks

    def _inflate_to(self, end: int) -> None:
        if end <= self.inflated:
            return
        for piece in self._pieces():
            if piece:
                self._keep(piece)
            if self.inflated >= end:
                return
        self._size = self.inflated  # shorter than the directory said: stop there

    def _keep(self, piece: Piece) -> None:
        if self._in_memory + len(piece) <= _SPOOL:
            self._kept.append((piece, 0, len(piece)))
            self._in_memory += len(piece)
        else:
            try:
                if self._spill is None:
                    self._spill = tempfile.TemporaryFile()
                at = self._spill.seek(0, io.SEEK_END)
                self._spill.write(piece)
            except OSError as exc:  # the file has no name: say the folder
                raise SpillFailed(exc.errno, exc.strerror or str(exc),
                                  tempfile.gettempdir()) from exc
            self._kept.append((None, at, len(piece)))
        self._starts.append(self.inflated)
        self.inflated += len(piece)
