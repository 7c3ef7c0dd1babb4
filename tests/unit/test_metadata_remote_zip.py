"""The METADATA entry found by its name in the tail read, on built wheels whose
directories hold decoys: a vendored ``*.dist-info/METADATA`` deeper in the tree,
names that only start like it, and a name that holds the entry signature."""

from __future__ import annotations

import io
import zipfile
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx
import pytest

from stacklock.errors import ZipReadError
from stacklock.metadata import remote_zip
from stacklock.metadata.ranges import RangeReader
from tests.helpers.ranges import range_response

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

METADATA = (b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
            b"Requires-Dist: filelock>=3\n")
DECOYS = [
    ("demo/_vendor/other-2.0.dist-info/METADATA", b"Name: other\nVersion: 2.0\n"),
    ("demo/notes.dist-info/METADATA.orig", b"not this one"),
    ("demo/PK\x01\x02odd.dist-info/METADATA.txt", b"nor this"),
]
WHEEL = "demo-1.0-py3-none-any.whl"


def _wheel(decoys_after: bool) -> bytes:
    members = [(f"demo/m{i:04d}.py", b"x = 1\n") for i in range(300)]
    dist = [("demo-1.0.dist-info/METADATA", METADATA),
            ("demo-1.0.dist-info/RECORD", b"")]
    ordered = members + (dist + DECOYS if decoys_after else DECOYS + dist)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in ordered:
            archive.writestr(name, data)
    return buf.getvalue()


@contextmanager
def _served(data: bytes) -> Iterator[tuple[Callable[[int], RangeReader], list[str]]]:
    """(open a reader with a tail of n bytes, the Range of every request)."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["range"])
        return range_response(request, data)

    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        def open_reader(tail: int) -> RangeReader:
            reader = RangeReader(http, "https://files.example.org/demo.whl",
                                 on_bytes=lambda _n: None)
            assert reader.open_tail(tail)
            return reader

        yield open_reader, seen


def _read(data: bytes) -> tuple[bytes, int]:
    with _served(data) as (open_reader, seen):
        raw = remote_zip.read_dist_info_metadata(open_reader(64 * 1024), WHEEL)
    return raw, len(seen)


def test_named_entry_beats_decoys_either_side() -> None:
    for after in (True, False):
        data = _wheel(after)
        raw, requests = _read(data)
        assert raw == zipfile.ZipFile(io.BytesIO(data)).read(
            "demo-1.0.dist-info/METADATA")
        assert requests == 1  # the whole small wheel is inside the tail


def test_directory_entries_found_by_name_equal_a_full_parse() -> None:
    data = _wheel(True)
    archive = zipfile.ZipFile(io.BytesIO(data))
    start = data.rfind(b"PK\x05\x06")
    cd_offset = int.from_bytes(data[start + 16 : start + 20], "little")
    window = data[cd_offset:start]
    named = remote_zip._metadata_entries(window)
    full = remote_zip._parse_entries(window, 0, len(window)) or []
    assert [e.name for e in named] == [
        n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    assert named == [e for e in full if e.name.endswith(".dist-info/METADATA")]


def test_an_entry_cut_at_the_front_is_not_taken() -> None:
    """A tail that starts inside the entry: its name is there, its header not."""
    data = _wheel(True)
    start = data.rfind(b"PK\x05\x06")
    cd_offset = int.from_bytes(data[start + 16 : start + 20], "little")
    window = data[cd_offset:start]
    hit = window.rfind(b"demo-1.0.dist-info/METADATA")
    header = window.rfind(b"PK\x01\x02", 0, hit)
    names = [e.name for e in remote_zip._metadata_entries(window[header + 10 :])]
    assert names == ["demo/_vendor/other-2.0.dist-info/METADATA"]  # after the cut


def test_a_range_read_across_two_fetched_ranges_asks_for_nothing() -> None:
    """The tail, then the bytes just before it: a read over both is answered
    from them (it was asked again: two more requests per small native wheel)."""
    data = _wheel(True)
    with _served(data) as (open_reader, seen):
        reader = open_reader(1000)
        start = len(data) - 1000
        assert reader.read_at(start - 500, 600) == data[start - 500 : start + 100]
        assert seen == ["bytes=-1000", f"bytes={start - 500}-{start - 1}"]
        assert reader.read_at(start - 400, 900) == data[start - 400 : start + 500]
        assert len(seen) == 2


def _listed(data: bytes, tail: int) -> tuple[bytes, list[remote_zip.Entry] | None,
                                              int]:
    """METADATA, the listing, and the requests, through a tail of ``tail``."""
    with _served(data) as (open_reader, seen):
        raw, entries = remote_zip.read_dist_info(open_reader(tail), WHEEL,
                                                 listing=True)
    return raw, entries, len(seen)


def _fresh_entries(data: bytes) -> list[remote_zip.Entry]:
    """What the native check's own read lists: a 16 KiB tail, then the rest."""
    with _served(data) as (open_reader, _seen):
        return remote_zip.read_entries(open_reader(16 * 1024))


def test_a_directory_the_tail_holds_is_listed_as_a_fresh_read_lists_it() -> None:
    data = _wheel(True)
    raw, entries, requests = _listed(data, 64 * 1024)
    assert raw == METADATA and requests == 1
    assert entries == _fresh_entries(data)
    assert len(entries) == len(zipfile.ZipFile(io.BytesIO(data)).namelist())
    assert _listed(data, 4096)[1] is None  # the tail starts inside the directory


def _patched(data: bytes, at: int, value: int, size: int) -> bytes:
    return data[:at] + value.to_bytes(size, "little") + data[at + size :]


def test_a_directory_that_does_not_check_out_is_never_listed() -> None:
    """METADATA is still found by its name; the listing is refused where the
    check's own read refuses the directory."""
    data = _wheel(True)
    eocd = data.rfind(b"PK\x05\x06")
    cd_offset = int.from_bytes(data[eocd + 16 : eocd + 20], "little")
    tenth = cd_offset
    for _ in range(10):
        tenth = data.index(b"PK\x01\x02", tenth + 1)
    broken = {
        # the tenth entry claims a comment: the chain no longer meets the end
        "chain": _patched(data, tenth + 32, 7, 2),
        # the end record counts one entry more than there are
        "count": _patched(data, eocd + 10, int.from_bytes(
            data[eocd + 10 : eocd + 12], "little") + 1, 2),
    }
    for bad in broken.values():
        raw, entries, _requests = _listed(bad, 64 * 1024)
        assert raw == METADATA and entries is None
        with pytest.raises(ZipReadError, match="central directory has"):
            _fresh_entries(bad)


def _bomb(stated: int | None) -> bytes:
    """A wheel whose METADATA inflates to 80 MiB (of spaces, 80 KB deflated);
    ``stated``: the size its central directory entry gives instead of the true
    one (a lying entry), None for the true one."""
    big = METADATA + b" " * (80 << 20)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("demo/__init__.py", b"")
        archive.writestr("demo-1.0.dist-info/METADATA", big)
        archive.writestr("demo-1.0.dist-info/RECORD", b"")
    data = bytearray(buf.getvalue())
    if stated is not None:
        at = data.index(b"PK\x01\x02", data.index(b"PK\x01\x02") + 4)  # METADATA's
        assert data[at + 46:at + 73] == b"demo-1.0.dist-info/METADATA"
        data[at + 24:at + 28] = stated.to_bytes(4, "little")
    return bytes(data)


@pytest.mark.parametrize(("stated", "said"), [
    (None, "demo-1.0.dist-info/METADATA: more than 67,108,864 bytes uncompressed"),
    (4096, "demo-1.0.dist-info/METADATA: more bytes than the 4,096 its directory "
           "entry states"),
])
def test_a_metadata_bomb_is_refused_without_being_inflated(stated: int | None,
                                                           said: str) -> None:
    """METADATA is inflated to no more than its directory entry states, and an
    entry stating more than 64 MiB is refused unread: an 80 MiB bomb, honest
    or behind an entry saying 4 KiB, costs neither its size in memory."""
    import tracemalloc

    with _served(_bomb(stated)) as (open_reader, _seen):
        reader = open_reader(1 << 20)
        tracemalloc.start()
        try:
            with pytest.raises(ZipReadError) as caught:
                remote_zip.read_dist_info_metadata(reader, WHEEL)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert str(caught.value) == said
    assert peak < 8 << 20, peak
