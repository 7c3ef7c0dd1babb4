"""Inflating a zip member from a block in its middle, knowing which bytes are exact.

A deflate stream (RFC 1951) is a chain of blocks, each starting at a bit offset and
referring up to 32 KiB back into what came before. Nothing records where a block
starts, so a decoder can only begin at the stream's start, or at a place found by
scanning for a plausible block header, as rapidgzip (Knespel and Brunst, HPDC 2023)
and pugz (Kerbiriou and Chikhi, 2019) do. What such a start decodes to depends on
the 32 KiB before it, which is not known: this module decodes with a window of one
repeated byte (:data:`FILL`), so that every byte copied, directly or through other
copies, from the unknown window comes out as that byte. A byte that is not
:data:`FILL` is therefore exact; a span that holds :data:`FILL` is decoded again with
another fill (:data:`OTHER`), and its bytes are exact where the two decodes agree.
Nothing is guessed.

Python's :mod:`zlib` starts a raw stream only at a byte boundary (it has no
``inflatePrime``). A block starting at bit ``k`` of a byte is reached by a short
prefix instead: a fixed-Huffman block of ``(k - 2) mod 8`` literals (of the fill,
nine bits each) and its end code, ``10 + 9t`` bits, which leaves the decoder at bit
``k`` of the member's own byte. The prefix's literals join the window, as fill.

A found start is only plausible: a place in the middle of a block can look like a
header and decode for a while. The caller decides what proves a start (decoding to
the member's end with the right length, and facts that agree with themselves:
:mod:`stacklock.native.partial`).
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from isal import isal_zlib

from stacklock.metadata.remote_zip import BAD_DEFLATE

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "FILL",
    "OTHER",
    "WINDOW",
    "Inflated",
    "Start",
    "block_starts",
    "inflate_from",
]

WINDOW = 32 << 10  # how far back a deflate stream refers
# the fills of the two decodes: literals of nine bits (144-255) for the prefix,
# and bytes rare in the tables the native check reads (mostly ASCII and small
# numbers)
FILL = 0xB7
OTHER = 0xE5
_HEADER_BITS = 17 + 19 * 3  # a dynamic block's header up to its last precode length
_NONZERO = re.compile(rb"[^\x00]")
_PROBE = 1 << 10  # compressed bytes a candidate start is first tried on
# the bits set in each byte value
_BIT_OFFSETS = tuple(tuple(k for k in range(8) if value >> k & 1)
                     for value in range(256))


@functools.cache
def _kraft_table() -> tuple[int, ...]:
    """For four 3-bit code lengths packed in 12 bits: the sum of 2**(7 - L) over
    those not zero (a complete code sums to 128 over all its lengths)."""
    out = []
    for packed in range(1 << 12):
        total = 0
        for i in range(4):
            length = (packed >> (3 * i)) & 7
            if length:
                total += 1 << (7 - length)
        out.append(total)
    return tuple(out)


def _dynamic_candidates(chunk: bytes) -> list[int]:
    """Bit offsets in ``chunk`` whose next 17 bits read as a dynamic-Huffman block
    header of the kind zlib writes for binary data (HDIST 29: all 30 distance
    codes; HLIT 16 to 29), found for every offset at once with big-integer bit
    operations, then kept where the precode lengths form a complete code."""
    bits = len(chunk) * 8
    x = int.from_bytes(chunk, "little")
    nx = x ^ ((1 << bits) - 1)
    mask = (nx >> 1) & (x >> 2)  # BTYPE 2 (bits 1-2: 0, 1)
    mask &= (x >> 7) & ((nx >> 4) | (nx >> 5) | (nx >> 6))  # HLIT 16..29
    mask &= (x >> 8) & (nx >> 9) & (x >> 10) & (x >> 11) & (x >> 12)  # HDIST 29
    limit = bits - _HEADER_BITS
    mask &= (1 << max(limit, 0)) - 1
    mask &= x >> 16  # HCLEN 8..15 (every block zlib wrote in the study)
    kraft = _kraft_table()
    offsets = _BIT_OFFSETS
    found = []
    for match in _NONZERO.finditer(mask.to_bytes(len(chunk), "little")):
        at = match.start()
        value = int.from_bytes(chunk[at:at + 11], "little")
        for k in offsets[match.group()[0]]:
            v = value >> (k + 13)
            lengths = (v >> 4) & ((1 << (3 * ((v & 15) + 4))) - 1)
            if (kraft[lengths & 0xFFF] + kraft[(lengths >> 12) & 0xFFF]
                    + kraft[(lengths >> 24) & 0xFFF] + kraft[(lengths >> 36) & 0xFFF]
                    + kraft[lengths >> 48]) == 128:
                found.append(8 * at + k)
    return found


def _stored_candidates(chunk: bytes) -> list[int]:
    """Bit offsets of stored blocks in ``chunk``: a byte-aligned LEN and its
    complement NLEN, the 3-bit header ending in the byte before them. The
    offset given is that of the LEN (see :func:`inflate_from`): such a block is
    decoded from a header of its own."""
    if len(chunk) < 5:
        return []
    x = int.from_bytes(chunk, "little")
    bits = len(chunk) * 8
    # where bytes i, i+1 are the complement of bytes i+2, i+3
    same = (x ^ (x >> 16)) ^ ((1 << bits) - 1)
    lanes = same.to_bytes(len(chunk), "little")
    found = []
    at = lanes.find(b"\x00\x00", 1)
    while 0 <= at < len(chunk) - 4:
        found.append(8 * at)
        at = lanes.find(b"\x00\x00", at + 1)
    return found


@dataclass(frozen=True, kw_only=True)
class Start:
    """A plausible block start: its bit offset, or for a stored block the bit
    offset of its LEN field (the header's three bits end in the byte before)."""

    bit: int
    stored: bool = False


def block_starts(data: bytes | memoryview, first: int, last: int, *,
                 step: int = 16 << 10) -> Iterator[Start]:
    """Plausible block starts in ``data[first:last]`` (byte offsets), in
    increasing order, scanned ``step`` bytes at a time: a caller that takes the
    first good one scans little. Dynamic-Huffman headers that zlib would not
    write for binary data are passed over (the next block will do), as are
    fixed-Huffman ones (rare)."""
    view = memoryview(data)
    at = first
    while at < last:
        end = min(at + step, last)
        # the header may run past the step: look a little further
        chunk = bytes(view[at:min(end + _HEADER_BITS // 8 + 2, len(view))])
        found = [Start(bit=8 * at + bit) for bit in _dynamic_candidates(chunk)
                 if bit < 8 * (end - at)]
        found += [Start(bit=8 * at + bit, stored=True)
                  for bit in _stored_candidates(chunk) if bit < 8 * (end - at)]
        yield from sorted(found, key=lambda start: start.bit)
        at = end


def _prefix(bit: int, fill: int) -> tuple[bytes, int]:
    """The bytes that leave a raw inflater at bit ``bit % 8`` of a byte, and the
    number of bits of the last one they use (its higher bits are the member's)."""
    k = bit % 8
    literals = (k - 2) % 8
    code = 0b110010000 + fill - 144  # a literal of 144-255: 9 bits, sent MSB first
    stream = [0, 1, 0]  # BFINAL 0, BTYPE 01 (fixed Huffman), LSB first
    for _ in range(literals):
        stream += [(code >> (8 - i)) & 1 for i in range(9)]
    stream += [0] * 7  # end of block (256): seven zero bits
    assert len(stream) % 8 == k
    out = bytearray((len(stream) + 7) // 8)
    for i, b in enumerate(stream):
        out[i // 8] |= b << (i % 8)
    return bytes(out), literals


@dataclass(frozen=True, kw_only=True)
class Inflated:
    """What a decode from a block start gave: ``out`` (window-dependent bytes as
    the fill), whether the stream ended (``eof``) and how many compressed bytes
    were left after its end (``left``)."""

    out: bytes
    eof: bool
    left: int
    # (compressed offset in the data, bytes out) as the decode went (``every``)
    points: tuple[tuple[int, int], ...] = ()


@functools.cache
def _window(fill: int) -> bytes:
    return bytes([fill]) * WINDOW


def inflate_from(data: bytes | memoryview, start: Start, *, fill: int = FILL,
                 limit: int = 0, probe: bool = False, every: int = 0,
                 ) -> Inflated | None:
    """Decode ``data`` from ``start`` with a window of ``fill``; None when the
    bytes are not deflate from there. ``limit``: stop once this many bytes are
    out (0: to the end of the stream or of ``data``). ``probe``: only the first
    :data:`_PROBE` compressed bytes are tried, with zlib (strict about every
    header and code; ISA-L, about twice as fast, decodes the rest). ``every``:
    feed that many compressed bytes at a time and note where the output stood
    after each (:attr:`Inflated.points`)."""
    view = memoryview(data)
    at = start.bit // 8
    if start.stored:
        # a stored block's own header: BFINAL 0, BTYPE 00, to the byte's end
        prefix, skip, rest = b"\x00", 0, view[at:]
    else:
        prefix, skip = _prefix(start.bit, fill)
        k = start.bit % 8
        if k:
            low = prefix[-1] & ((1 << k) - 1)
            prefix = prefix[:-1] + bytes([low | (view[at] & (0xFF << k) & 0xFF)])
            at += 1
    rest = view[at:]
    if probe:
        rest = rest[:_PROBE]
    found = _decode(prefix, skip, rest, fill, limit, probe, every)
    if found is not None and start.stored and not found.eof and not probe and \
            not limit:
        # the stream's last block stored: its header said BFINAL 1
        final = _decode(b"\x01", 0, rest, fill, limit, probe, every)
        if final is not None and final.eof and not final.left:
            found = final
    if found is not None and every:
        found = Inflated(out=found.out, eof=found.eof, left=found.left,
                         points=tuple((at + c, u) for c, u in found.points))
    return found


def _decode(prefix: bytes, skip: int, rest: memoryview, fill: int, limit: int,
            probe: bool, every: int) -> Inflated | None:
    inflater = (zlib.decompressobj(-15, zdict=_window(fill)) if probe
                else isal_zlib.decompressobj(-15, zdict=_window(fill)))
    points: list[tuple[int, int]] = []
    try:
        parts = [inflater.decompress(prefix)]
        produced = len(parts[0])
        step = every or len(rest) or 1
        for at in range(0, len(rest), step):
            room = limit + skip - produced if limit else 0
            if limit and room <= 0:
                break
            piece = rest[at:at + step]
            out = inflater.decompress(piece, room) if limit else \
                inflater.decompress(piece)
            parts.append(out)
            produced += len(out)
            if every:
                used = at + len(piece) - len(inflater.unconsumed_tail) - \
                    len(inflater.unused_data)
                points.append((used, produced - skip))
            if inflater.eof or (limit and inflater.unconsumed_tail):
                break
    except BAD_DEFLATE:
        return None
    if skip and len(parts[0]) >= skip:
        # the prefix's literals cut from the first piece, not from the whole
        # output, and a lone piece taken as it is: no copy of every byte
        # decoded (a tail's are megabytes)
        parts[0], skip = parts[0][skip:], 0
    out = b"".join([part for part in parts if part])
    return Inflated(out=out[skip:] if skip else out, eof=inflater.eof,
                    left=len(inflater.unused_data), points=tuple(points))
