"""Reading a real wheel's shared objects by HTTP range requests (served from its
real bytes), the cache by sha256, and the errors a user sees."""

from __future__ import annotations

import hashlib
import os
import random
import struct
import subprocess
import sys
import zipfile
from dataclasses import replace

import httpx
import pytest

from stacklock.errors import NativeError
from stacklock.metadata import remote_zip
from stacklock.metadata.listings import Listings
from stacklock.metadata.ranges import RangeReader
from stacklock.native.elf import is_shared_object_name, parse_shared_object
from stacklock.native.stream import Discarded, InflatedMember
from stacklock.native.wheel import NativeWheel, WheelReader
from stacklock.store import ArtifactStore
from stacklock.uvbin import find_uv
from tests.helpers.native_facts import MARKUPSAFE
from tests.helpers.ranges import range_response
from tests.helpers.wheelkit import build_wheel

BODY = MARKUPSAFE.read_bytes()
SHA = hashlib.sha256(BODY).hexdigest()
URL = f"https://files.example.org/packages/{MARKUPSAFE.name}"
WHEEL = NativeWheel(package="markupsafe", version="3.0.4", filename=MARKUPSAFE.name,
                    url=URL, sha256=SHA, size=len(BODY))


class RangeServer:
    """Answers from the wheel's bytes as a real file server does (the shared
    responder), or not at all, counting the body bytes it sent."""

    def __init__(self, *, honour_range: bool = True, status: int = 206) -> None:
        self.sent = 0
        self.requests = 0
        self.honour_range = honour_range
        self.status = status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.status not in (200, 206):
            return httpx.Response(self.status)
        if not self.honour_range:
            response = httpx.Response(200, content=BODY)
        else:
            response = range_response(request, BODY)
        self.sent += len(response.content)
        return response


def _reader(server: RangeServer, tmp_path, **kw) -> WheelReader:
    http = httpx.Client(transport=httpx.MockTransport(server))
    return WheelReader(http, cache_dir=tmp_path / "cache", **kw)


def _local_objects():
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        names = [n for n in archive.namelist() if is_shared_object_name(n)]
        out = []
        for name in names:
            with archive.open(name) as raw:
                member = InflatedMember(iter(lambda r=raw: r.read(65536), b""),
                                        size=archive.getinfo(name).file_size)
                out.append(parse_shared_object(member, path=name))
    return names, out


def test_remote_read_equals_the_local_file_and_counts_every_byte(tmp_path):
    server = RangeServer()
    reader = _reader(server, tmp_path)
    natives = reader.read(WHEEL)
    names, objects = _local_objects()
    assert natives.files == tuple(sorted(names))
    assert natives.objects == tuple(objects)
    assert natives.sha256 == SHA
    assert reader.bytes_read == server.sent == reader.bytes_by_wheel[WHEEL.filename]
    assert reader.requests == server.requests >= 2  # the tail, then the member


def _listed(server: RangeServer) -> Listings:
    """What a resolve's METADATA read leaves: markupsafe's whole directory,
    held by its 64 KiB tail, kept for the check."""
    listings = Listings(keep=is_shared_object_name)
    with httpx.Client(transport=httpx.MockTransport(server)) as http:
        reader = RangeReader(http, URL, on_bytes=lambda _n: None)
        assert reader.open_tail(64 * 1024)
        _raw, entries = remote_zip.read_dist_info(reader, WHEEL.filename,
                                                  listing=True)
    assert entries is not None
    listings.add(URL, reader.size, entries)
    return listings


def test_a_listed_directory_takes_the_place_of_the_tail_read(tmp_path):
    fresh = RangeServer()
    before = _reader(fresh, tmp_path / "fresh").read(WHEEL)
    listings = _listed(RangeServer())
    server = RangeServer()
    reader = _reader(server, tmp_path / "listed", listings=listings)
    assert reader.read(WHEEL) == before
    assert reader.requests == server.requests == fresh.requests - 1
    # another file at the URL than the one listed (its size differs): read as
    # before, its own tail first
    server = RangeServer()
    other = replace(WHEEL, size=len(BODY) + 1)
    assert _reader(server, tmp_path / "other", listings=listings).read(
        other) == before
    assert server.requests == fresh.requests


def test_a_second_read_comes_from_the_cache_by_sha256(tmp_path):
    first = _reader(RangeServer(), tmp_path).read(WHEEL)
    server = RangeServer()
    reader = _reader(server, tmp_path)
    assert reader.read(WHEEL) == first
    assert server.requests == reader.requests == 0 and reader.bytes_read == 0
    assert reader.bytes_by_wheel == {WHEEL.filename: 0}


def test_a_torn_cache_entry_is_read_again(tmp_path):
    first = _reader(RangeServer(), tmp_path).read(WHEEL)
    entry = next((tmp_path / "cache" / "native").rglob("*.json.gz"))
    entry.write_bytes(entry.read_bytes()[:20])
    server = RangeServer()
    assert _reader(server, tmp_path).read(WHEEL) == first
    assert server.requests >= 2  # read again: the tail, then the member


def test_a_wheel_in_the_artifact_store_is_read_from_disk(tmp_path):
    store = ArtifactStore(tmp_path / "cache" / "artifacts")
    blob = store.root / "sha256" / SHA[:2] / SHA
    blob.parent.mkdir(parents=True)
    blob.write_bytes(BODY)
    server = RangeServer()
    natives = _reader(server, tmp_path, store=store).read(WHEEL)
    assert server.requests == 0
    assert natives.objects == tuple(_local_objects()[1])


def test_offline_without_a_cache_entry_says_what_to_do(tmp_path):
    with pytest.raises(NativeError) as caught:
        _reader(RangeServer(), tmp_path, offline=True).read(WHEEL)
    assert caught.value.exit_code == 2
    assert MARKUPSAFE.name in str(caught.value) and "without --offline" in str(
        caught.value)


@pytest.mark.parametrize(("server", "words"), [
    (RangeServer(honour_range=False), "ignores HTTP range requests"),
    (RangeServer(status=404), "HTTP 404"),
])
def test_unreadable_servers_are_one_line_errors_naming_the_url(tmp_path, server,
                                                                words):
    with pytest.raises(NativeError) as caught:
        _reader(server, tmp_path).read(WHEEL)
    text = str(caught.value)
    assert "\n" not in text and URL in text and words in text


def test_a_wheel_on_a_folder_index_is_read_from_its_file(tmp_path):
    server = RangeServer()
    local = NativeWheel(package="markupsafe", version="3.0.4",
                        filename=MARKUPSAFE.name, url=MARKUPSAFE.resolve().as_uri(),
                        sha256=SHA, size=len(BODY))
    natives = _reader(server, tmp_path).read(local)
    assert server.requests == 0
    assert natives.objects == tuple(_local_objects()[1])


def test_a_large_member_is_listed_unread_until_asked_for(tmp_path, monkeypatch):
    """Over LARGE_EXTENSION compressed, an extension module's facts wait until
    the check asks (read_large); the answer is cached with the rest of the
    wheel."""
    monkeypatch.setattr("stacklock.native.wheel.LARGE_EXTENSION", 0)
    server = RangeServer()
    reader = _reader(server, tmp_path)
    first = reader.read(WHEEL)
    path = _local_objects()[0][0]
    assert first.objects == () and first.large == (path,)
    assert first.files == (path,)
    sent = server.sent
    full = reader.read_large(WHEEL, first.large)
    assert full.objects == tuple(_local_objects()[1]) and full.large == ()
    assert server.sent > sent
    again = _reader(RangeServer(), tmp_path).read_large(WHEEL, first.large)
    assert again == full  # from the cache


def test_a_forward_jump_is_inflated_without_being_kept(monkeypatch):
    """The middle of a large member is inflated and dropped; a read that falls
    in it raises Discarded, which the reader answers by reading again."""
    monkeypatch.setattr("stacklock.native.stream._SKIP", 1000)
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        name = _local_objects()[0][0]
        body = archive.read(name)
    pieces = [body[i:i + 997] for i in range(0, len(body), 997)]
    member = InflatedMember(iter(pieces), size=len(body), skip=True)
    assert member.read(100) == body[:100]
    member.seek(len(body) - 3000)
    assert member.read(3000) == body[-3000:]
    member.seek(50)
    assert member.read(50) == body[50:100]  # kept: before the jump
    member.seek(5000)
    with pytest.raises(Discarded):
        member.read(10)


def test_a_large_member_needing_its_middle_is_read_again_whole(tmp_path,
                                                                monkeypatch):
    monkeypatch.setattr("stacklock.native.wheel.LARGE_EXTENSION", 0)
    monkeypatch.setattr("stacklock.native.stream._SKIP", 64)
    reader = _reader(RangeServer(), tmp_path)
    first = reader.read(WHEEL)
    full = reader.read_large(WHEEL, first.large)
    assert full.objects == tuple(_local_objects()[1])


def test_a_full_temporary_folder_is_named_not_blamed_on_the_wheel(tmp_path):
    """Kept bytes past the memory limit go to a temporary file; when the disk
    refuses them (EFBIG past RLIMIT_FSIZE in a subprocess, as ENOSPC would),
    the error is the operating system's and names the temporary folder: not
    "not a readable ELF file" nor "delete the wheel from the cache"."""
    import os
    import subprocess
    import sys

    spill = tmp_path / "tmp"
    spill.mkdir()
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "import stacklock.native.stream as stream\n"
        "from stacklock.native.wheel import NativeWheel, _read_local\n"
        "stream._SPOOL = 1000\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "wheel = NativeWheel(package='markupsafe', version='3.0.4',\n"
        "                    filename=Path(sys.argv[1]).name, url='', sha256='0')\n"
        "try:\n"
        "    _read_local(Path(sys.argv[1]), wheel)\n"
        "except OSError as exc:\n"
        "    from stacklock.cli import _os_error\n"
        "    print(exc.errno, exc.filename)\n"
        "    print('%s (try: %s)' % _os_error(exc))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(MARKUPSAFE)],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "TMPDIR": str(spill)})
    first, line = done.stdout.splitlines()
    errno_, name = first.split()
    assert int(errno_) == 27  # EFBIG
    assert name == str(spill)
    # the CLI's line: the folder, and advice for a size limit, not for space
    assert line == (f"{spill}: File too large (try: a file system that takes "
                    "larger files, or point TMPDIR elsewhere)")


def test_a_highly_compressed_member_comes_out_in_bounded_pieces(tmp_path):
    """64 MiB of zeros deflate to ~64 KB: streamed in 8 MiB fetches, the member
    still comes out in pieces of at most 4 MiB (not one piece as large as the
    fetch inflates to), byte for byte."""
    import io

    body = bytes(64 << 20)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zero/libzero.so", body)
    data = buffer.getvalue()
    assert len(data) < 1 << 20
    client = httpx.Client(transport=httpx.MockTransport(
        lambda request: range_response(request, data)))
    reader = RangeReader(client, "https://files.example.org/zero-1.0-py3-none-any.whl",
                         on_bytes=lambda n: None)
    assert reader.open_tail(16 * 1024)
    (entry,) = remote_zip.read_entries(reader)
    pieces = list(remote_zip.iter_member(reader, entry, chunk_size=8 << 20))
    assert max(map(len, pieces)) <= 4 << 20
    assert b"".join(pieces) == body


def _copies_wheel(tmp_path):
    """A wheel shipping one library three times (a wheel holds no symbolic
    links: libcupti.so, .so.13 and .so.2026.2.0 in triton) beside markupsafe's
    extension module; the library is that module's bytes under a library's
    names, followed by 1.2 MiB that do not compress (past the ELF file's own
    bytes: the same facts), so that each copy is fetched on its own."""
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        name = next(n for n in archive.namelist() if is_shared_object_name(n))
        ext = archive.read(name)
    lib = ext + random.Random(0).randbytes(1200 * 1024)
    files = {"cp/lib/libcopy.so": lib, "cp/lib/libcopy.so.13": lib,
             "cp/lib/libcopy.so.13.2.0": lib, f"cp/{name.rsplit('/', 1)[-1]}": ext}
    return build_wheel(tmp_path / "built", "cp", "1.0", files)


def _served_copies(tmp_path):
    """The copies wheel (:func:`_copies_wheel`) served by range, its
    NativeWheel, a client of that server, and the Range headers asked."""
    wheel_path = _copies_wheel(tmp_path)
    body = wheel_path.read_bytes()
    asked: list[str | None] = []

    def serve(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("range"))
        return range_response(request, body)

    wheel = NativeWheel(package="cp", version="1.0", filename=wheel_path.name,
                        url=f"https://files.example.org/{wheel_path.name}",
                        sha256=hashlib.sha256(body).hexdigest(), size=len(body))
    return (wheel_path, wheel, httpx.Client(transport=httpx.MockTransport(serve)),
            asked)


def test_copies_of_one_member_are_read_once(tmp_path):
    """Remote and from disk: the three copies cost one member read, and each
    has the facts of a read of its own, under its own path."""
    wheel_path, wheel, http, asked = _served_copies(tmp_path)
    natives = WheelReader(http, cache_dir=tmp_path / "remote").read(wheel)
    local = WheelReader(http, cache_dir=tmp_path / "local").read(
        replace(wheel, url=wheel_path.resolve().as_uri()))
    with zipfile.ZipFile(wheel_path) as archive:
        own = {}
        for path in natives.files:
            with archive.open(path) as raw:
                member = InflatedMember(iter(lambda r=raw: r.read(65536), b""),
                                        size=archive.getinfo(path).file_size)
                own[path] = parse_shared_object(member, path=path)
        offsets = {i.filename: i.header_offset for i in archive.infolist()}
    assert len(natives.files) == 4
    assert {o.path: o for o in natives.objects} == own == \
        {o.path: o for o in local.objects}
    # where the members' reads start: at one copy of the library only
    starts = [int(r.split("=")[1].split("-")[0]) for r in asked
              if r is not None and not r.startswith("bytes=-")]
    copies = [p for p in own if "libcopy" in p]
    assert [sum(offsets[p] <= at < offsets[p] + 1024 for at in starts)
            for p in copies].count(0) == 2


def test_copies_of_a_large_member_wait_and_come_with_the_one_asked_for(
        tmp_path, monkeypatch):
    """Copies of a library over LARGE_MEMBER are all left unread; asking for
    one of them (read_large) reads it once and gives the copies its facts."""
    monkeypatch.setattr("stacklock.native.wheel.LARGE_MEMBER", 1 << 20)
    _path, wheel, http, _asked = _served_copies(tmp_path)
    reader = WheelReader(http, cache_dir=tmp_path / "cache")
    copies = ("cp/lib/libcopy.so", "cp/lib/libcopy.so.13", "cp/lib/libcopy.so.13.2.0")
    first = reader.read(wheel)
    assert first.large == copies
    assert [o.path for o in first.objects] == [p for p in first.files
                                               if p not in copies]
    before = reader.bytes_read
    then = reader.read_large(wheel, ["cp/lib/libcopy.so.13"])
    assert then.large == ()
    facts = {o.path: o for o in then.objects}
    assert {replace(facts[p], path="") for p in copies} == \
        {replace(facts[copies[0]], path="")}  # one read, three paths
    assert 1200 * 1024 < reader.bytes_read - before < 2 * 1200 * 1024


def test_a_member_claiming_another_s_crc_is_a_copy_that_does_not_install(tmp_path):
    """A crafted wheel whose second library claims the first's CRC-32 and sizes
    with other bytes is judged by the first's facts; uv, which the lock is
    installed with, refuses that wheel (Bad CRC), so the judgement never
    stands for an installed environment."""
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        name = next(n for n in archive.namelist() if is_shared_object_name(n))
        ext = archive.read(name)
    built = build_wheel(tmp_path / "built", "cp", "1.0",
                        {"cp/lib/liba.so": ext, "cp/lib/libb.so": ext})
    data = bytearray(built.read_bytes())
    with zipfile.ZipFile(built) as archive:
        info = archive.getinfo("cp/lib/libb.so")
    names, extra = struct.unpack_from("<HH", data, info.header_offset + 26)
    data[info.header_offset + 30 + names + extra + info.compress_size // 2] ^= 0xFF
    crafted = tmp_path / "crafted" / built.name
    crafted.parent.mkdir()
    crafted.write_bytes(bytes(data))
    wheel = NativeWheel(package="cp", version="1.0", filename=crafted.name,
                        url=crafted.resolve().as_uri(),
                        sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    natives = WheelReader(httpx.Client(), cache_dir=tmp_path / "cache").read(wheel)
    facts = {o.path: o for o in natives.objects}
    assert replace(facts["cp/lib/libb.so"], path="") == \
        replace(facts["cp/lib/liba.so"], path="")
    uv, venv = find_uv(), tmp_path / "venv"
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv")}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)],
                   check=True, capture_output=True, env=env)
    done = subprocess.run(
        [uv, "pip", "install", "--offline", "--no-index", "--python",
         str(venv / "bin" / "python"), str(crafted)],
        capture_output=True, text=True, env=env)
    assert done.returncode != 0
    assert "Bad CRC" in done.stderr and "cp/lib/libb.so" in done.stderr


def test_a_local_wheel_whose_member_is_not_deflate_is_one_line(tmp_path):
    """A wheel on disk (a folder index, the artifact cache) whose shared object's
    deflate data is broken: a NativeError naming the file, not zipfile's
    zlib.error as a traceback (what the code before raised)."""
    body = bytearray(BODY)
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        info = next(i for i in archive.infolist() if is_shared_object_name(i.filename))
    name_len, extra_len = struct.unpack_from("<HH", body, info.header_offset + 26)
    data_at = info.header_offset + 30 + name_len + extra_len
    for at in range(data_at + 2000, data_at + 2064):
        body[at] ^= 0xA5
    path = tmp_path / MARKUPSAFE.name
    path.write_bytes(bytes(body))
    wheel = replace(WHEEL, url=path.as_uri(), sha256=hashlib.sha256(body).hexdigest())
    reader = WheelReader(httpx.Client(), cache_dir=tmp_path / "cache")
    with pytest.raises(NativeError) as raised:
        reader.read(wheel)
    line = str(raised.value)
    assert "\n" not in line and str(path) in line and "cannot read" in line
    assert not list((tmp_path / "cache").glob("native/*"))  # no facts written
