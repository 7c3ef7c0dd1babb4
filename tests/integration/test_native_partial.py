"""Reading a shared object from its head, tail and dynamic segment
(native.partial), served by range requests from recorded real members: the facts
are a whole read's, field for field, from fewer bytes; a member that cannot be
read so, or that is built to mislead, is read whole, never given a wrong fact."""

from __future__ import annotations

import hashlib
import re
import struct
import zlib

import httpx
import pytest

from stacklock.metadata import remote_zip
from stacklock.metadata.ranges import RangeReader
from stacklock.native import deflate, partial
from stacklock.native.elf import parse_headers, parse_sections
from stacklock.native.wheel import NativeWheel, WheelReader
from tests.helpers.partial_members import (
    facts_digest,
    members,
    recorded_reads,
    zip_of,
)
from tests.helpers.ranges import range_response

URL = "https://files.example.org/packages/w-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"


class Server:
    """Answers range requests from ``body`` as a file server does, counting."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent = 0
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        response = range_response(request, self.body)
        self.sent += len(response.content)
        return response


def _read_parts(body: bytes, path: str):
    """read_members on the member ``path`` of the zip ``body``, and the bytes
    its reads took (the directory's not counted)."""
    server = Server(body)
    reader = RangeReader(httpx.Client(transport=httpx.MockTransport(server)), URL,
                         on_bytes=lambda _n: None)
    assert reader.open_tail(1 << 16)
    entry = next(e for e in remote_zip.read_entries(reader) if e.name == path)
    server.sent = 0
    return partial.read_members(reader, [entry])[path], server.sent


def _read_wheel(body: bytes, tmp_path, *, partial: int = 64 << 10):
    """WheelReader.read of the one wheel ``body``, its members of ``partial``
    compressed bytes or more read in part (the recorded ones are smaller than
    the reader's own threshold)."""
    server = Server(body)
    wheel = NativeWheel(package="w", version="1.0", filename=URL.rsplit("/", 1)[1],
                        url=URL, sha256=hashlib.sha256(body).hexdigest(),
                        size=len(body))
    reader = WheelReader(httpx.Client(transport=httpx.MockTransport(server)),
                         cache_dir=tmp_path / "cache", partial=partial)
    return reader.read(wheel), server


@pytest.mark.parametrize("member", members(), ids=lambda m: m.path.rsplit("/", 1)[1])
def test_a_recorded_member_gives_a_whole_reads_facts_or_is_read_whole(member):
    found, sent = _read_parts(member.zip_file(), member.path)
    if isinstance(found, partial.Unavailable):
        return  # read whole (the next test): never a fact of its own
    assert facts_digest(found.to_dict()) == member.record["facts_sha256"]
    assert sent < len(member.raw)


def test_most_recorded_members_are_read_in_part():
    results = [_read_parts(m.zip_file(), m.path)[0] for m in members()]
    assert sum(not isinstance(r, partial.Unavailable) for r in results) >= 4


@pytest.mark.parametrize("recorded", recorded_reads(),
                         ids=lambda r: r.path.rsplit("/", 1)[1])
def test_a_large_member_read_in_part_from_its_recorded_requests(recorded):
    asked = []

    def replay(request: httpx.Request) -> httpx.Response:
        first, last = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)",
                                            request.headers["range"]).groups())
        key = (first, last - first + 1)
        asked.append(key)
        assert key in recorded.requests, f"not recorded: {key} (record again)"
        return httpx.Response(206, content=recorded.requests[key], headers={
            "content-range": f"bytes {first}-{last}/{recorded.size}"})

    reader = RangeReader(httpx.Client(transport=httpx.MockTransport(replay)), URL,
                         on_bytes=lambda _n: None)
    reader.open_known(recorded.size)
    entry = remote_zip.Entry(**recorded.entry)
    found = partial.read_members(reader, [entry])[entry.name]
    assert not isinstance(found, partial.Unavailable), found
    assert found is not None
    assert facts_digest(found.to_dict()) == recorded.record["facts_sha256"]
    assert list(found.needed) == recorded.record["needed"]
    fetched = sum(length for _at, length in asked)
    assert fetched < entry.compressed_size / 5  # the point of reading in part


def test_the_wheel_reader_reads_large_members_in_part_and_gives_the_same_facts(
        tmp_path):
    chosen = members()
    body = zip_of([(m.path, m.raw, m.crc, m.size, 8) for m in chosen])
    natives, server = _read_wheel(body, tmp_path)
    assert {facts_digest(o.to_dict()) for o in natives.objects} == \
        {m.record["facts_sha256"] for m in chosen}
    assert server.sent < len(body) * 3 // 4  # the members read in part saved


# -- members built to mislead -------------------------------------------------

def _deflated(data: bytes) -> bytes:
    compress = zlib.compressobj(6, zlib.DEFLATED, -15)
    return compress.compress(data) + compress.flush()


def test_a_stream_offering_a_false_boundary_to_its_end_never_gives_a_wrong_fact(
        tmp_path):
    # a real library, then a final stored block whose payload is itself a
    # deflate stream (of the library's own tail, its needed names changed):
    # a boundary in that payload decodes to the member's end and places what it
    # decodes over the library's tables
    member = next(m for m in members() if m.path.endswith("libjpeg-944920e9.so.8.3.2"))
    real = member.whole
    fake = real[-300_000:].replace(b"libc.so.6", b"libx.so.6")
    payload = _deflated(fake)
    assert 40_000 < len(payload) < 65_535
    compress = zlib.compressobj(6, zlib.DEFLATED, -15)
    stream = compress.compress(real) + compress.flush(zlib.Z_SYNC_FLUSH) + \
        b"\x01" + struct.pack("<HH", len(payload), len(payload) ^ 0xFFFF) + payload
    content = real + payload
    assert zlib.decompress(stream, -15) == content
    body = zip_of([(member.path, stream, zlib.crc32(content), len(content), 8)])
    found, _sent = _read_parts(body, member.path)
    # read in part after all (from a boundary the library's own stream has),
    # or whole: the library's facts either way
    if not isinstance(found, partial.Unavailable):
        assert facts_digest(found.to_dict()) == member.record["facts_sha256"]
    natives, _server = _read_wheel(body, tmp_path)
    assert facts_digest(natives.objects[0].to_dict()) == member.record["facts_sha256"]
    assert "libx.so.6" not in natives.objects[0].needed


def test_a_central_directory_lying_about_the_size_is_read_whole(tmp_path):
    member = next(m for m in members() if "custom_ops4" in m.path)
    honest = zip_of([(member.path, member.raw, member.crc, member.size, 8)])
    lying = zip_of([(member.path, member.raw, member.crc, member.size + 4096, 8)])
    found, _sent = _read_parts(lying, member.path)
    assert isinstance(found, partial.Unavailable)  # placed wrong: never agrees
    assert _read_parts(honest, member.path)[0] is not None


def test_a_stored_member_is_read_whole(tmp_path):
    member = next(m for m in members() if "mtrand" in m.path)
    body = zip_of([(member.path, member.whole, member.crc, member.size, 0)])
    found, sent = _read_parts(body, member.path)
    assert isinstance(found, partial.Unavailable) and sent == 0
    natives, _server = _read_wheel(body, tmp_path)
    assert facts_digest(natives.objects[0].to_dict()) == member.record["facts_sha256"]


def _got_zeroed(member):
    """The member's bytes with the GOT's first word (the dynamic segment's
    address) zeroed, its ELF headers and section headers: nothing the loader
    reads changes, but the word no longer anchors or vouches for anything."""
    real = bytearray(member.whole)
    headers = parse_headers(bytes(real[:64]))
    assert headers is not None
    sections = parse_sections(bytes(real[headers.shoff:headers.sections_end]), headers)
    dynamic = next(s for s in sections if s.type == 6)
    for got in sorted((s for s in sections if s.offset > dynamic.offset and
                       s.type == 1 and s.flags & 1), key=lambda s: s.offset)[:2]:
        real[got.offset:got.offset + 8] = bytes(8)
    return real, headers, sections


def test_a_dynamic_segment_without_its_anchor_is_never_placed_by_a_window(tmp_path):
    # a window cannot place the segment without its GOT anchor
    member = next(m for m in members() if "custom_ops4" in m.path)
    content = bytes(_got_zeroed(member)[0])
    body = zip_of([(member.path, _deflated(content), zlib.crc32(content),
                    len(content), 8)])
    natives, _server = _read_wheel(body, tmp_path)
    assert facts_digest(natives.objects[0].to_dict()) == member.record["facts_sha256"]


def test_section_headers_that_misplace_a_loaded_section_vouch_for_nothing(tmp_path):
    # the GOT's first word zeroed (the tail is then vouched for by the section
    # headers alone), and one loaded section's file offset moved in its header:
    # the headers no longer describe the image the program headers map, so
    # they vouch for nothing and the member is read whole, its own facts
    member = next(m for m in members() if "custom_ops4" in m.path)
    real, headers, sections = _got_zeroed(member)
    zeroed = bytes(real)
    moved = next(i for i, s in enumerate(sections) if s.type == 1 and s.flags & 2
                 and not s.flags & 4 and s.size > 64 and s.offset > 4096)
    at = headers.shoff + moved * headers.shentsize + 24  # sh_offset
    struct.pack_into("<Q", real, at, struct.unpack_from("<Q", real, at)[0] + 16)
    for content, in_part in ((zeroed, True), (bytes(real), False)):
        body = zip_of([(member.path, _deflated(content), zlib.crc32(content),
                        len(content), 8)])
        found, _sent = _read_parts(body, member.path)
        assert isinstance(found, partial.Unavailable) is not in_part
        natives, _server = _read_wheel(body, tmp_path / str(in_part))
        assert facts_digest(natives.objects[0].to_dict()) == \
            member.record["facts_sha256"]


def test_a_window_start_is_taken_only_where_it_decodes_as_a_block_start_does():
    # a length and its complement at a byte boundary read as a stored block:
    # when the length runs past the window, that "block" decodes through any
    # window (its bytes are the payload), so it proves nothing; a stored
    # block that ends inside the window, and a stream that goes on, do
    payload = bytes(range(256)) * 40
    stored = struct.pack("<HH", len(payload), len(payload) ^ 0xFFFF) + payload
    compress = zlib.compressobj(6, zlib.DEFLATED, -15)
    window = stored + compress.compress(bytes(20_000)) + \
        compress.flush(zlib.Z_SYNC_FLUSH)  # the stream goes on past the window
    start = deflate.Start(bit=0, stored=True)
    found = deflate.inflate_from(window, start)
    assert found is not None and found.out[:len(payload)] == payload
    assert partial._through(found, start, window, last=False)
    cut = window[:len(payload) // 2]  # the block runs past this window's end
    found = deflate.inflate_from(cut, start)
    assert found is not None and not found.eof  # it decodes: it used to be taken
    assert not partial._through(found, start, cut, last=False)
    # a stream that ends inside a window that is not the member's end
    ended = _deflated(bytes(1000)) + bytes(64)
    found = deflate.inflate_from(ended, deflate.Start(bit=0))
    assert found is not None and found.eof and found.left
    assert not partial._through(found, deflate.Start(bit=0), ended, last=True)
    assert not partial._through(found, deflate.Start(bit=0), ended, last=False)


def test_a_member_read_whole_beside_one_read_in_part_costs_no_request_of_its_own(
        tmp_path):
    # numpy's mtrand read in part, orjson's extension after it read whole: the
    # latter comes with the first round of the former's reads (its tail's
    # neighbour), not in a request after them
    chosen = {m.path.split("/", 1)[0]: m for m in members()}
    large, small = chosen["numpy"], chosen["orjson"]
    threshold = (len(small.raw) + len(large.raw)) // 2
    alone, alone_server = _read_wheel(
        zip_of([(large.path, large.raw, large.crc, large.size, 8)]),
        tmp_path / "alone", partial=threshold)
    both, both_server = _read_wheel(
        zip_of([(m.path, m.raw, m.crc, m.size, 8) for m in (large, small)]),
        tmp_path / "both", partial=threshold)
    assert {facts_digest(o.to_dict()) for o in both.objects} == \
        {m.record["facts_sha256"] for m in (large, small)}
    assert [facts_digest(o.to_dict()) for o in alone.objects] == \
        [large.record["facts_sha256"]]
    assert alone_server.sent < len(large.raw)  # read in part
    assert both_server.requests == alone_server.requests


def test_a_word_is_found_where_a_search_for_all_its_bytes_finds_it():
    # the GOT anchor is searched for by its bytes other than zeros: the same
    # places as bytes.find, on a real member's code and data
    whole = members()[0].whole
    words = [whole[at:at + 8] for at in range(0, len(whole), len(whole) // 40)]
    words += [b"\0" * 8, struct.pack("<Q", 0x1234), struct.pack(">Q", 0x1234),
              b"\xff" * 8]
    for word in words:
        for start in (0, 1, len(whole) // 3, len(whole) - 4, len(whole) + 1):
            assert partial._find_word(whole, word, start) == \
                whole.find(word, start), (word, start)
