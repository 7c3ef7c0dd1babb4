"""A seekable file over a zip member that is inflated only as far as it is read.

pyelftools wants a seekable file. A shared object in a wheel is a deflate stream,
which can only be read forwards, and some are 1 GB once inflated. This file pulls
inflated pieces from an iterator when a read reaches past what it has, and keeps
what it has inflated in a spooled temporary file (memory up to a limit, disk
beyond), so a read can go back without inflating again and memory stays small.
Reads that never reach the end of the member leave the rest unfetched:
:attr:`InflatedMember.inflated` says how far it went.
"""

from __future__ import annotations

import io
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["InflatedMember"]

_SPOOL = 32 << 20  # inflated bytes kept in memory before spilling to disk


class InflatedMember(io.RawIOBase):
    """Read-only, seekable view of ``size`` bytes produced by ``chunks``."""

    def __init__(self, chunks: Iterator[bytes], *, size: int) -> None:
        super().__init__()
        self._chunks = chunks
        self._size = size
        self._spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL)
        self._pos = 0
        self.inflated = 0

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
        self._inflate_to(end)
        self._spool.seek(self._pos)
        got = self._spool.readinto(memoryview(buffer)[: end - self._pos])
        self._pos += got
        return got

    def close(self) -> None:
        self._spool.close()
        super().close()

    def _inflate_to(self, end: int) -> None:
        if end <= self.inflated:
            return
        self._spool.seek(self.inflated)
        for piece in self._chunks:
            self._spool.write(piece)
            self.inflated += len(piece)
            if self.inflated >= end:
                return
        self._size = self.inflated  # shorter than the directory said: stop there
