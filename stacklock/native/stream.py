"""A seekable file over a zip member that is inflated only as far as it is read.

The ELF reader (:mod:`stacklock.native.elf`) wants a seekable file. A shared
object in a wheel is a deflate stream, which can only be read forwards, and some
are 1 GB once inflated. This file pulls inflated pieces from an iterator when a
read reaches past what it has, and keeps
what it has inflated in a spooled temporary file (memory up to a limit, disk
beyond), so a read can go back without inflating again and memory stays small.
Reads that never reach the end of the member leave the rest unfetched:
:attr:`InflatedMember.inflated` says how far it went.

A shared object's loader view is its first pages and, in most large libraries,
its last ones (the dynamic section and ``.dynstr`` after patchelf): with
``skip``, the first forward jump of more than :data:`_SKIP` past what is
inflated is inflated without being kept (350 MB of libtorch_cpu's 451), and a
later read in that gap raises :class:`Discarded` (the caller reads the member
again, keeping all). :meth:`InflatedMember.keep_until` says where what the
reader will come back for ends (the ELF reader: its first loaded segment,
where the symbol tables lie); past it a forward jump of more than
:data:`_HINTED_SKIP` is not kept either but for its last :data:`_MARGIN`, so
the code between the tables and the dynamic segment is inflated and dropped
instead of spooled.
"""

from __future__ import annotations

import io
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Discarded", "InflatedMember"]

_SPOOL = 32 << 20  # inflated bytes kept in memory before spilling to disk
_SKIP = 16 << 20  # a forward jump this long is inflated without being kept
_HINTED_SKIP = 1 << 20  # the same, past where keep_until said reads come back
# kept before the target of such a jump: patchelf (auditwheel) puts the tables
# it rewrites just before the dynamic segment (numpy's, scipy's OpenBLAS: up
# to 1 MB before it)
_MARGIN = 4 << 20


class Discarded(Exception):
    """A read fell in the part of the member inflated without being kept."""


class InflatedMember(io.RawIOBase):
    """Read-only, seekable view of ``size`` bytes produced by ``chunks``."""

    def __init__(self, chunks: Iterator[bytes], *, size: int,
                 skip: bool = False, keep_until: int | None = None) -> None:
        super().__init__()
        self._chunks = chunks
        self._size = size
        self._spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL)
        self._pos = 0
        self.inflated = 0
        # kept: [0, _kept) at the start of the spool, then [_gap_end, inflated)
        self._skip = skip
        self._kept = -1  # no gap yet
        self._gap_end = 0
        self._leftover = b""
        self._keep_until = keep_until  # with skip: see keep_until()

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
        if self._skip and self._kept < 0:
            if self._keep_until is not None:
                if self._pos - max(self.inflated, self._keep_until) > \
                        _HINTED_SKIP + _MARGIN:
                    self._skip_to(self._pos - _MARGIN)
            elif self._pos - self.inflated > _SKIP:
                self._skip_to(self._pos)
        self._inflate_to(end)
        if self._kept < 0:
            where = self._pos
        elif self._pos >= self._gap_end:
            where = self._kept + self._pos - self._gap_end
        elif end <= self._kept:
            where = self._pos
        else:
            raise Discarded(f"bytes {self._pos}-{end} were not kept")
        self._spool.seek(where)
        got = self._spool.readinto(memoryview(buffer)[: end - self._pos])
        self._pos += got
        return got

    def close(self) -> None:
        self._spool.close()
        super().close()

    @property
    def kept_bytes(self) -> int:
        """Inflated bytes kept to be read again (the rest was dropped)."""
        return self._spool.seek(0, io.SEEK_END)

    def keep_until(self, offset: int) -> None:
        """Reads will come back to ``[0, offset)`` only (with ``skip``)."""
        self._keep_until = offset

    def _skip_to(self, start: int) -> None:
        """Inflate up to ``start``, keeping only what keep_until asked for."""
        if self._keep_until is not None:
            self._inflate_to(min(self._keep_until, start))
        self._kept = self.inflated
        for piece in self._pieces():
            if self.inflated + len(piece) > start:
                cut = start - self.inflated
                self._leftover = piece[cut:]
                self.inflated = start
                break
            self.inflated += len(piece)
        self._gap_end = self.inflated

    def _pieces(self) -> Iterator[bytes]:
        if self._leftover:
            piece, self._leftover = self._leftover, b""
            yield piece
        for piece in self._chunks:  # not ``yield from``: closing this must
            yield piece             # not close the chunks

    def _inflate_to(self, end: int) -> None:
        if end <= self.inflated:
            return
        self._spool.seek(0, io.SEEK_END)
        for piece in self._pieces():
            self._spool.write(piece)
            self.inflated += len(piece)
            if self.inflated >= end:
                return
        self._size = self.inflated  # shorter than the directory said: stop there
