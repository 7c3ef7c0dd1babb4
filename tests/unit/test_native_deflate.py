"""Decoding real wheel members from a block in their middle (native.deflate):
every block start is found and decodes to the member's end, a byte marked exact
is the member's own, and a place that only looks like a block start never
decodes to the end. Checked against zlib's own block boundaries (Z_BLOCK)."""

from __future__ import annotations

import zlib

import pytest

from stacklock.native import deflate
from tests.helpers.partial_members import members
from tests.helpers.zblocks import blocks

MEMBERS = members()


def _exact(member, start: deflate.Start) -> tuple[bytes, bytes, int]:
    """The decode from ``start`` with each fill, and where it falls."""
    first = deflate.inflate_from(member.raw, start)
    second = deflate.inflate_from(member.raw, start, fill=deflate.OTHER)
    assert first is not None and second is not None
    assert first.eof and second.eof and not first.left
    return first.out, second.out, member.size - len(first.out)


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: m.path.rsplit("/", 1)[-1])
def test_every_block_start_decodes_to_the_end_and_exact_bytes_are_the_members(member):
    truth = member.whole
    found = {s.bit for s in deflate.block_starts(member.raw, 0, len(member.raw))}
    starts = blocks(member.raw)
    assert len(starts) > 3
    unknown = 0
    for block in starts[1:]:
        if block.kind == 0:  # stored: the scan gives its LEN, after the header
            start = deflate.Start(bit=(block.bit + 3 + 7) // 8 * 8, stored=True)
        elif block.kind == 2:
            start = deflate.Start(bit=block.bit)
        else:
            continue  # fixed Huffman: not scanned for
        # the scan finds every stored block and the dynamic ones zlib writes
        # for binary data (HDIST 29, HLIT 16..29)
        head = int.from_bytes(member.raw[block.bit // 8:block.bit // 8 + 3],
                              "little") >> (block.bit % 8)
        if block.kind == 0 or ((head >> 8) & 31 == 29 and (head >> 7) & 1):
            assert start.bit in found
        first, second, at = _exact(member, start)
        assert at == block.out  # placed from the member's end: where zlib says
        agree = bytes(a if a == b else 0 for a, b in zip(first, second, strict=True))
        mask = bytes(1 if a == b else 0 for a, b in zip(first, second, strict=True))
        assert agree == bytes(t if m else 0 for t, m in zip(truth[at:], mask,
                                                            strict=True))
        # a byte that differs between the decodes is the fill in each
        unknown += mask.count(0)
        assert all(a == deflate.FILL and b == deflate.OTHER
                   for a, b, m in zip(first, second, mask, strict=True) if not m)
    if member.path.endswith("_superlu.cpython-312-x86_64-linux-gnu.so"):
        assert unknown  # window-dependent bytes were there to be found


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: m.path.rsplit("/", 1)[-1])
def test_a_place_that_only_looks_like_a_block_start_never_decodes_to_the_end(member):
    real = {b.bit for b in blocks(member.raw)} | {
        (b.bit + 3 + 7) // 8 * 8 for b in blocks(member.raw) if b.kind == 0}
    false = [s for s in deflate.block_starts(member.raw, 0, len(member.raw))
             if s.bit not in real]
    assert false  # the scan does offer places that are not block starts
    for start in false:
        found = deflate.inflate_from(member.raw, start)
        assert found is None or not found.eof or found.left


@pytest.mark.parametrize("shift", range(8))
def test_a_block_at_any_bit_of_a_byte_is_reached_through_the_prefix(shift):
    # a real member's stream (no stored block: moving one would move its
    # padding), moved ``shift`` bits into its first byte
    member = MEMBERS[2]
    assert {b.kind for b in blocks(member.raw)} == {2}
    moved = (int.from_bytes(member.raw, "little") << shift) | (0b1011011 >> (7 - shift))
    data = moved.to_bytes(len(member.raw) + 1, "little")
    found = deflate.inflate_from(data, deflate.Start(bit=shift))
    assert found is not None and found.eof
    assert found.out == member.whole  # from the stream's start: nothing unknown


def test_a_limit_stops_the_decode_and_a_probe_tries_the_first_bytes_only():
    member = MEMBERS[1]
    start = deflate.Start(bit=blocks(member.raw)[2].bit)
    limited = deflate.inflate_from(member.raw, start, limit=1000)
    assert limited is not None and len(limited.out) == 1000 and not limited.eof
    probe = deflate.inflate_from(member.raw, start, probe=True)
    assert probe is not None and not probe.eof and 0 < len(probe.out)


def test_bytes_that_are_not_deflate_from_a_place_give_none():
    member = MEMBERS[1]
    junk = zlib.crc32(member.raw).to_bytes(4, "little") * 64
    assert deflate.inflate_from(junk + member.raw, deflate.Start(bit=3)) is None
