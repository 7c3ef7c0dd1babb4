"""The loader's-view ELF reader against binutils' readelf (an independent reader)
on real shared objects: a real wheel's extension module and the interpreter's
own extension modules."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from stacklock.native.elf import is_shared_object_name, parse_shared_object
from stacklock.native.stream import InflatedMember
from tests.helpers.native_facts import MARKUPSAFE

needs_readelf = pytest.mark.skipif(shutil.which("readelf") is None,
                                   reason="needs binutils readelf as the oracle")
# readelf --dyn-syms -W: Num: Value Size Type Bind Vis Ndx Name[@version] (a size
# over 99,999 is printed in hex)
_SYM = re.compile(r"^\s*\d+:\s+\S+\s+\S+\s+(\w+)\s+(\w+)\s+(\w+)\s+(\w+)\s+(\S+)")
_TAG = re.compile(r"\((NEEDED|SONAME|RUNPATH|RPATH)\)\s+[^\[]*\[([^\]]*)\]")


def _readelf(path: Path) -> dict[str, object]:
    dynamic = subprocess.run(["readelf", "-d", "-W", str(path)], capture_output=True,
                             text=True, check=True).stdout
    tags: dict[str, list[str]] = {}
    for kind, value in _TAG.findall(dynamic):
        tags.setdefault(kind, []).append(value)
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(path)],
                             capture_output=True, text=True, check=True).stdout
    undefined, exported = set(), set()
    for line in symbols.splitlines():
        m = _SYM.match(line)
        if m is None:
            continue
        kind, bind, vis, ndx, name = m.groups()
        name = name.split("@")[0]
        if kind in ("SECTION", "FILE") or not name:
            continue
        if ndx == "UND":
            if bind == "GLOBAL":
                undefined.add(name)
        elif bind in ("GLOBAL", "WEAK", "UNIQUE") and vis in ("DEFAULT", "PROTECTED"):
            exported.add(name)
    return {"needed": tags.get("NEEDED", []), "soname": tags.get("SONAME"),
            "runpath": [p for v in tags.get("RUNPATH", []) + tags.get("RPATH", [])
                        for p in v.split(":") if p],
            "undefined": undefined, "exported": exported}


def _interpreter_modules() -> list[Path]:
    import _ctypes
    import _json
    import _socket

    return [Path(m.__file__) for m in (_ctypes, _json, _socket)
            if getattr(m, "__file__", None)]


def _compare(parsed, oracle) -> None:
    assert parsed is not None
    assert list(parsed.needed) == oracle["needed"]
    assert parsed.soname == (oracle["soname"] or [None])[0]
    assert list(parsed.runpath) == oracle["runpath"]
    assert set(parsed.undefined) == oracle["undefined"]
    assert set(parsed.exported) == oracle["exported"]


@needs_readelf
@pytest.mark.parametrize("path", _interpreter_modules(), ids=lambda p: p.name)
def test_interpreter_extension_modules_read_as_readelf_reads_them(path):
    with path.open("rb") as fh:
        parsed = parse_shared_object(fh, path=path.name)
    _compare(parsed, _readelf(path))
    assert any(s.startswith("PyInit_") for s in parsed.exported)


@needs_readelf
def test_a_real_wheels_extension_module_read_from_its_zip_member(tmp_path):
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        name = next(n for n in archive.namelist() if is_shared_object_name(n))
        data = archive.read(name)
        with archive.open(name) as raw:
            pieces = iter(lambda: raw.read(4096), b"")
            member = InflatedMember(pieces, size=archive.getinfo(name).file_size)
            parsed = parse_shared_object(member, path=name)
    target = tmp_path / "member.so"
    target.write_bytes(data)
    _compare(parsed, _readelf(target))
    assert "PyInit__speedups" in parsed.exported
    assert "libc.so.6" in parsed.needed


def test_reading_stops_before_the_section_headers_at_the_end():
    """The loader's view never needs the section headers (the file's last bytes):
    inflation stops short of the end of the member."""
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        name = next(n for n in archive.namelist() if is_shared_object_name(n))
        data = archive.read(name)
    pulled = []

    def pieces():
        for at in range(0, len(data), 1024):
            pulled.append(at)
            yield data[at:at + 1024]

    member = InflatedMember(pieces(), size=len(data))
    assert parse_shared_object(member, path=name) is not None
    assert member.inflated < len(data)
    assert len(pulled) < -(-len(data) // 1024)


def test_not_an_elf_file_is_none_and_names_are_recognised():
    assert parse_shared_object(io.BytesIO(b"#!/bin/sh\n" * 10), path="x.so") is None
    assert parse_shared_object(io.BytesIO(b""), path="x.so") is None
    for name in ("a/libcudart.so.12", "lib/libc10.so", "m.abi3.so",
                 "x/_C.cpython-312-x86_64-linux-gnu.so",
                 "torchvision.libs/libjpeg.a396e33c.so.8"):
        assert is_shared_object_name(name), name
    for name in ("a/libfoo.so.py", "include/x.h", "lib/libfoo.a", "a/so.txt"):
        assert not is_shared_object_name(name), name


_LIBRARY = """
extern int needed_strong(void);
extern int needed_weak(void) __attribute__((weak));
int exported_function(void) { return needed_strong() + (needed_weak ? 1 : 0); }
int exported_data = 7;
__attribute__((visibility("hidden"))) int hidden_function(void) { return 3; }
"""


def _compile(tmp_path: Path, *flags: str) -> Path:
    assert shutil.which("gcc"), "gcc is needed to build the test library"
    source = tmp_path / "lib.c"
    source.write_text(_LIBRARY)
    out = tmp_path / "libcase.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcase.so.1",
                    "-Wl,-rpath,$ORIGIN/../a:$ORIGIN/b", *flags, "-o", str(out),
                    str(source), "-lm"], check=True, capture_output=True)
    return out


@needs_readelf
@pytest.mark.parametrize("style", ["gnu", "sysv", "both"])
def test_each_symbol_hash_table_counts_the_symbols_as_readelf_does(tmp_path, style):
    """The dynamic segment does not say how many symbols there are; DT_GNU_HASH
    (the default), DT_HASH (older linkers) or both do."""
    tags = "-Wl,--enable-new-dtags" if style == "gnu" else "-Wl,--disable-new-dtags"
    path = _compile(tmp_path, f"-Wl,--hash-style={style}", tags)
    with path.open("rb") as fh:
        parsed = parse_shared_object(fh, path=path.name)
    _compare(parsed, _readelf(path))
    assert parsed.soname == "libcase.so.1"
    assert parsed.runpath == ("$ORIGIN/../a", "$ORIGIN/b")
    assert "needed_strong" in parsed.undefined
    assert "needed_weak" not in parsed.undefined
    assert {"exported_function", "exported_data"} <= set(parsed.exported)
    assert "hidden_function" not in parsed.exported


def _dynamic_entries(data: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """(PT_DYNAMIC's file offset, [(entry offset, tag, value)]), 64-bit LE."""
    import struct

    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        kind, _f, offset, _v, _p, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if kind == 2:
            return offset, [(offset + at, *struct.unpack_from("<qQ", data, offset + at))
                            for at in range(0, filesz, 16)]
    raise AssertionError("no PT_DYNAMIC")


def test_a_broken_object_is_a_value_error_never_a_wrong_answer(tmp_path):
    """Tables outside the file or outside every loaded segment, a file cut short:
    a ValueError (which the wheel reader turns into one line naming the member),
    never an empty or partial set of facts."""
    import struct

    path = _compile(tmp_path)
    data = path.read_bytes()
    start, entries = _dynamic_entries(data)
    strtab_at = next(at for at, tag, _value in entries if tag == 5)
    cases = {
        "cut inside the dynamic segment": data[: start + 8],
        "string table in no loaded segment": (
            data[:strtab_at + 8] + struct.pack("<Q", 0x7FFF_0000_0000)
            + data[strtab_at + 16:]),
        "program headers past the end": (
            data[:56] + struct.pack("<H", 0xFFFE) + data[58:]),
    }
    for case, blob in cases.items():
        with pytest.raises(ValueError):
            parse_shared_object(io.BytesIO(blob), path=case)


def _streamed(data: bytes) -> tuple[InflatedMember, list[int]]:
    """``data`` as the wheel reader streams a medium member: 1 MiB pieces, no
    gap until the ELF reader's hint; and the offsets of the pieces handed out."""
    handed: list[int] = []

    def pieces():
        for at in range(0, len(data), 1 << 20):
            handed.append(at)
            yield data[at:at + (1 << 20)]

    return InflatedMember(pieces(), size=len(data), skip=True,
                          keep_until=len(data)), handed


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build")
@needs_readelf
def test_a_library_streamed_once_keeps_its_tables_not_its_code(tmp_path):
    """24 MB of code between the symbol tables (first loaded segment) and the
    dynamic segment: the streamed reader keeps the tables, drops the code,
    reads the member once and finds what readelf finds."""
    source = tmp_path / "big.c"
    source.write_text(
        '__attribute__((section(".text"))) static const char pad[24 << 20] = {1};\n'
        + "\n".join(f"int big_f{i}(int x) {{ return x * {i} + pad[{i}]; }}"
                    for i in range(200)) + "\nextern int needs_me(void);\n"
        "int big_call(void) { return needs_me(); }\n")
    library = tmp_path / "libbig.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-Wl,-soname,libbig.so",
                    "-o", str(library), str(source)], check=True, capture_output=True)
    data = library.read_bytes()
    member, handed = _streamed(data)
    parsed = parse_shared_object(member, path="libbig.so",
                                 tables_before=member.keep_until)
    _compare(parsed, _readelf(library))
    assert len(handed) == len(range(0, len(data), 1 << 20))  # one pass
    assert member.kept_bytes < len(data) // 2  # the code was not kept


def test_a_hinted_jump_keeps_its_margin_and_drops_the_rest(monkeypatch):
    """After keep_until, a long forward jump keeps [0, hint) and the last
    margin before its target; a read in between is Discarded (the reader
    then reads the member again, keeping all)."""
    from stacklock.native.stream import Discarded

    monkeypatch.setattr("stacklock.native.stream._HINTED_SKIP", 100)
    monkeypatch.setattr("stacklock.native.stream._MARGIN", 300)
    body = bytes(range(256)) * 40  # 10,240 bytes
    member = InflatedMember(iter([body[i:i + 512] for i in range(0, len(body), 512)]),
                            size=len(body), skip=True, keep_until=len(body))
    assert member.read(64) == body[:64]
    member.keep_until(1000)
    member.seek(8000)
    assert member.read(100) == body[8000:8100]
    member.seek(7700)  # inside the margin
    assert member.read(300) == body[7700:8000]
    member.seek(900)  # before the hint
    assert member.read(100) == body[900:1000]
    assert member.kept_bytes < len(body) // 2
    member.seek(4000)
    with pytest.raises(Discarded):
        member.read(10)


def _tables_past_the_data(tmp_path: Path) -> Path:
    """A library laid out as patchelf leaves libtorch_cpu: 24 MB of code, the
    dynamic segment, 8 MB of data, and only then ``.dynstr`` (moved there by a
    linker script made from gcc's own)."""
    shown = subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,--verbose", "-o",
                            str(tmp_path / "probe.so"), "-x", "c", "/dev/null"],
                           check=True, capture_output=True, text=True).stdout
    script = shown.split("=" * 50)[1].splitlines()[1:]
    line = next(s for s in script if s.strip().startswith(".dynstr"))
    script.remove(line)
    script.insert(next(i for i, s in enumerate(script)
                       if s.strip().startswith(".data1")) + 1, line)
    (tmp_path / "moved.ld").write_text("\n".join(script) + "\n")
    source = tmp_path / "moved.c"
    source.write_text(
        '__attribute__((section(".text"))) static const char pad[24 << 20] = {1};\n'
        "char filler[8 << 20] = {1};\n"
        "int moved_f(int x) { return x * 3 + pad[5] + filler[7]; }\n"
        "extern int needs_me(void);\nint moved_call(void) { return needs_me(); }\n")
    library = tmp_path / "libmoved.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-Wl,-soname,libmoved.so",
                    "-Wl,-T," + str(tmp_path / "moved.ld"), "-o", str(library),
                    str(source)], check=True, capture_output=True)
    return library


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build")
@needs_readelf
def test_tables_moved_past_the_data_are_read_without_keeping_the_data(tmp_path):
    """Told where its tables begin once the dynamic segment is read, the
    streamed member keeps neither the code before the dynamic segment nor the
    8 MB of data after it, reads the member once and finds what readelf finds."""
    library = _tables_past_the_data(tmp_path)
    data = library.read_bytes()
    sections = subprocess.run(["readelf", "-SW", str(library)], check=True,
                              capture_output=True, text=True).stdout
    dynstr_at = int(re.search(r"\.dynstr\s+STRTAB\s+\S+\s+(\S+)", sections)[1], 16)
    dynamic_at = int(re.search(r"\.dynamic\s+DYNAMIC\s+\S+\s+(\S+)", sections)[1], 16)
    assert dynstr_at - dynamic_at > 8 << 20  # the data lies between
    member, handed = _streamed(data)
    parsed = parse_shared_object(member, path="libmoved.so",
                                 tables_before=member.keep_until,
                                 tables_at=member.reads_at)
    _compare(parsed, _readelf(library))
    assert len(handed) == len(range(0, len(data), 1 << 20))  # one pass
    assert member.kept_bytes < 6 << 20  # the 4 MiB margin, the tables; no data


def test_what_is_told_ahead_is_dropped_and_a_read_just_behind_keeps_it(monkeypatch):
    """reads_at drops up to the nearest place still ahead; a read into what was
    dropped is Discarded; a read beginning just behind what is inflated (it may
    run on) keeps the member whole."""
    from stacklock.native.stream import Discarded

    monkeypatch.setattr("stacklock.native.stream._HINTED_SKIP", 500)  # "just"
    body = bytes(range(256)) * 400  # 102,400 bytes
    pieces = [body[i:i + 1000] for i in range(0, len(body), 1000)]
    member = InflatedMember(iter(pieces), size=len(body), skip=True,
                            keep_until=len(body))
    assert member.read(10) == body[:10]  # inflates the first piece
    member.reads_at([5, 90_000, 60_000])
    member.seek(60_000)
    assert member.read(5000) == body[60_000:65_000]
    member.seek(5)
    assert member.read(100) == body[5:105]  # kept before
    member.seek(30_000)
    with pytest.raises(Discarded):
        member.read(10)

    whole = InflatedMember(iter(pieces), size=len(body), skip=True,
                           keep_until=len(body))
    assert whole.read(10) == body[:10]
    whole.reads_at([900, 60_000])  # 900 is behind 1,000: its read may run on
    whole.seek(900)
    assert whole.read(59_200) == body[900:60_100]
    assert whole.kept_bytes == 61_000


def test_kept_bytes_past_the_memory_limit_are_read_back_from_a_file(monkeypatch):
    """Over _SPOOL kept bytes go to a temporary file; a read across the two
    returns the member's bytes."""
    monkeypatch.setattr("stacklock.native.stream._SPOOL", 5000)
    body = bytes(range(251)) * 100  # 25,100 bytes
    member = InflatedMember(iter([body[i:i + 1500] for i in range(0, len(body), 1500)]),
                            size=len(body))
    member.seek(20_000)
    assert member.read(5100) == body[20_000:]
    member.seek(3000)
    assert member.read(9000) == body[3000:12_000]  # memory, then the file
    assert member.kept_bytes == len(body)
    member.close()


def test_a_table_said_to_lie_past_the_member_inflates_no_further_than_its_end():
    """A broken (or hostile) dynamic segment pointing far past the member: the
    member is inflated to its declared size, not for as long as the deflate
    stream would go on, and the read there finds nothing."""
    handed = 0

    def endless():
        nonlocal handed
        while handed < 1000:  # far more than the member's 10,000 bytes
            handed += 1
            yield bytes(1000)

    member = InflatedMember(endless(), size=10_000, skip=True, keep_until=10_000)
    assert member.read(10) == bytes(10)
    member.reads_at([1 << 60])
    member.seek(1 << 60)
    assert member.read(10) == b""
    assert handed <= 11


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build")
@needs_readelf
def test_a_local_wheel_is_read_without_keeping_the_code(tmp_path, monkeypatch):
    """A wheel in the artifact cache (after an install) is read as a remote one
    is: its 24 MB of code and 8 MB of data inflated, not kept, so nothing goes
    to a temporary file (before, every member was kept whole, spilling past
    the memory limit: libtorch_cpu's 451 MB)."""
    from stacklock.native import stream
    from stacklock.native.wheel import NativeWheel, _read_local

    library = _tables_past_the_data(tmp_path)
    wheel_path = tmp_path / "moved-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel_path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(library, "moved/libmoved.so")
    monkeypatch.setattr(stream, "_SPOOL", 6 << 20)

    def no_spill() -> None:
        raise AssertionError("kept bytes went to a temporary file")

    monkeypatch.setattr(stream.tempfile, "TemporaryFile", no_spill)
    natives = _read_local(wheel_path, NativeWheel(
        package="moved", version="1.0", filename=wheel_path.name, url="",
        sha256="0" * 64))
    (parsed,) = natives.objects
    assert parsed.path == "moved/libmoved.so"
    _compare(parsed, _readelf(library))
