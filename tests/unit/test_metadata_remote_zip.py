"""The METADATA entry found by its name in the tail read, on built wheels whose
directories hold decoys: a vendored ``*.dist-info/METADATA`` deeper in the tree,
names that only start like it, and a name that holds the entry signature."""

from __future__ import annotations

import io
import zipfile

import httpx

from stacklock.metadata import remote_zip
from stacklock.metadata.ranges import RangeReader
from tests.helpers.ranges import range_response

METADATA = (b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
            b"Requires-Dist: filelock>=3\n")
DECOYS = [
    ("demo/_vendor/other-2.0.dist-info/METADATA", b"Name: other\nVersion: 2.0\n"),
    ("demo/notes.dist-info/METADATA.orig", b"not this one"),
    ("demo/PK\x01\x02odd.dist-info/METADATA.txt", b"nor this"),
]


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


def _read(data: bytes) -> tuple[bytes, int]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return range_response(request, data)

    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        reader = RangeReader(http, "https://files.example.org/demo.whl",
                                         on_bytes=lambda _n: None)
        assert reader.open_tail(64 * 1024)
        raw = remote_zip.read_dist_info_metadata(reader, "demo-1.0-py3-none-any.whl")
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
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["range"])
        return range_response(request, data)

    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        reader = RangeReader(http, "https://files.example.org/demo.whl",
                             on_bytes=lambda _n: None)
        assert reader.open_tail(1000)
        start = len(data) - 1000
        assert reader.read_at(start - 500, 600) == data[start - 500 : start + 100]
        assert seen == ["bytes=-1000", f"bytes={start - 500}-{start - 1}"]
        assert reader.read_at(start - 400, 900) == data[start - 400 : start + 500]
        assert len(seen) == 2
