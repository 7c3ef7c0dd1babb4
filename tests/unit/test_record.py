"""RECORD's one reader (stacklock.record): real RECORDs read as they are, hostile
ones (huge, a NUL byte, a row of 10 MB, rows of other shapes, paths that leave
their place) each refused as one RecordError naming the file and line."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import threading
import zipfile
from pathlib import Path

import pytest

from stacklock.errors import RecordError
from stacklock.record import (
    MAX_RECORD_BYTES,
    MAX_RECORD_ROWS,
    load_record,
    parse_record,
    record_bytes,
    record_digest,
    rewrite_record,
    sha256_of_digest,
    wheel_record,
)
from tests.helpers.data import DATA

TOOLKIT = DATA / "cuda" / "wheel-toolkit"
GOOD = "pkg/m.py,sha256=YWJj,3\npkg-1.0.dist-info/RECORD,,\n"


def _refused(content: bytes, *, installed: bool = True, where: str = "RECORD"
             ) -> str:
    with pytest.raises(RecordError) as caught:
        parse_record(content, where=where, installed=installed)
    message = caught.value.message
    assert message.startswith(f"{where}: ") and "\n" not in message
    assert len(str(caught.value)) < 1000
    return message


def test_real_records_read_as_csv_reads_them() -> None:
    """Every RECORD of the recorded real wheels and installed toolkit wheels
    (tests/data):
    the same paths and digests as the csv module gives, none refused."""
    seen = 0
    for path in sorted(TOOLKIT.glob("*.dist-info/RECORD")):
        record = load_record(path.parent)
        assert record is not None
        rows = list(csv.reader(io.StringIO(path.read_text("utf-8"))))
        assert record.entries == {r[0]: r[1] for r in rows}
        seen += len(rows)
    for wheel in sorted(w for w in DATA.rglob("*.whl") if w.is_file()):
        with zipfile.ZipFile(wheel) as zf:
            name, record = wheel_record(zf, wheel.name)
            rows = list(csv.reader(io.StringIO(zf.read(name).decode())))
        assert record.entries == {r[0]: r[1] for r in rows}
        assert record.hashed == {r[0]: r[1] for r in rows if r[1]}
        seen += len(rows)
    assert seen > 150


def test_an_installed_record_reaches_the_venv_not_beyond() -> None:
    """uv writes a script as ../../../bin/NAME (site-packages is three levels
    below the venv): allowed once installed, never in a wheel; a fourth level
    leaves the venv."""
    scripts = b"../../../bin/tool,sha256=YWJj,3\n"
    assert parse_record(scripts, where="R", installed=True).entries
    assert "leaves the wheel" in _refused(scripts, installed=False)
    for path in (b"../../../../etc/passwd", b"a/../../../../../etc/shadow",
                 b"../../../bin/../../x"):
        line = _refused(path + b",sha256=YWJj,3\n")
        assert "line 1: a path that leaves the venv" in line


@pytest.mark.parametrize(("content", "expect"), [
    (b"pkg/a\x00.py,sha256=YWJj,3\n", "line 1: a path holding the control "
     "character '\\x00'"),
    (GOOD.encode() + b"/etc/passwd,sha256=YWJj,3\n", "line 3: an absolute path"),
    (b"pkg/m.py,sha256=YWJj\n", "line 1: 2 fields, a RECORD row has 3"),
    (b"pkg/m.py,sha256=YWJj,3,x\n", "line 1: 4 fields"),
    (b"pkg/m.py,md5,3\n", "line 1: a digest that is not algorithm=base64"),
    (b"pkg/m.py,sha256=YWJj,-3\n", "line 1: a size that is not a number"),
    (b"pkg/m.py,sha256=YWJj,99999999999999999999999\n", "a size that is not"),
    (GOOD.encode() * 2, "line 3: pkg/m.py listed twice"),
    (b",sha256=YWJj,3\n", "line 1: an empty path"),
    (b'"pkg/m.py"x,sha256=YWJj,3\n', "line 1: not CSV"),
    (b"\xff\xfe,,\n", "not UTF-8 (byte 0)"),
])
def test_a_row_no_installer_writes_is_refused(content: bytes, expect: str) -> None:
    assert expect in _refused(content)


def test_a_row_of_ten_megabytes_is_refused_before_csv_sees_it() -> None:
    """csv's own limit (131,072 per field) raised csv.Error, a traceback."""
    row = b"pkg/" + b"a" * (10 << 20) + b".py,sha256=YWJj,3\n"
    line = _refused(GOOD.encode() + row)
    assert "line 3: a row of 10,485,781 characters (at most 16,384)" in line
    path = b"pkg/" + b"a" * 5000 + b".py,,\n"
    assert "a path of 5,007 characters (at most 4,096)" in _refused(path)


def test_too_many_rows_or_bytes_is_refused() -> None:
    rows = b"\n" * (MAX_RECORD_ROWS + 1)
    assert f"more than {MAX_RECORD_ROWS:,} rows" in _refused(rows)
    huge = b"x" * (MAX_RECORD_BYTES + 1)
    assert "larger than 64 MiB" in _refused(huge)


def test_an_installed_record_that_is_no_small_regular_file(tmp_path: Path) -> None:
    """A FIFO (would block), a folder, a sparse 65 MiB file: one error each,
    naming the file; no RECORD at all is None."""
    assert load_record(tmp_path) is None and record_bytes(tmp_path) is None
    fifo = tmp_path / "fifo.dist-info"
    fifo.mkdir()
    os.mkfifo(fifo / "RECORD")
    writer = threading.Timer(30, lambda: (fifo / "RECORD").open("w").close())
    writer.start()
    try:
        with pytest.raises(RecordError, match="RECORD: not a regular file"):
            load_record(fifo)
    finally:
        writer.cancel()
    folder = tmp_path / "folder.dist-info"
    (folder / "RECORD").mkdir(parents=True)
    with pytest.raises(RecordError, match="a directory"):
        record_bytes(folder)
    huge = tmp_path / "huge.dist-info"
    huge.mkdir()
    with (huge / "RECORD").open("wb") as fh:
        fh.truncate(65 << 20)  # sparse: no disk used
    with pytest.raises(RecordError, match=f"{huge}/RECORD: larger than 64 MiB"):
        load_record(huge)


def test_a_wheels_record_is_measured_before_it_is_read(tmp_path: Path) -> None:
    """A RECORD member of 65 MiB (70 kB compressed) is refused by its size
    before it is inflated; a wheel with two RECORDs is refused."""
    wheel = tmp_path / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb-1.0.dist-info/RECORD", b"\n" * (65 << 20))
    with zipfile.ZipFile(wheel) as zf, pytest.raises(RecordError) as caught:
        wheel_record(zf, wheel.name)
    assert caught.value.message == (
        f"{wheel.name}: bomb-1.0.dist-info/RECORD: 68,157,440 bytes, larger than "
        "64 MiB")
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("a-1.dist-info/RECORD", GOOD)
        zf.writestr("b-1.dist-info/RECORD", GOOD)
    with zipfile.ZipFile(wheel) as zf, pytest.raises(RecordError,
                                                      match="expected one"):
        wheel_record(zf, wheel.name)


def test_record_rewrite_touches_only_the_changed_rows() -> None:
    content = (b'pkg/m.py,sha256=abc,10\r\n"pkg/a,b.py",sha256=def,3\r\n'
               b"pkg-1.0.dist-info/RECORD,,\r\n")
    record = parse_record(content, where="RECORD", installed=True)
    out = rewrite_record(record, {"pkg/a,b.py": b"new"})
    lines = out.decode().split("\r\n")
    assert lines[0] == "pkg/m.py,sha256=abc,10"
    assert lines[1] == f'"pkg/a,b.py",{record_digest(b"new")},3'
    assert lines[2] == "pkg-1.0.dist-info/RECORD,,"
    again = parse_record(out, where="RECORD", installed=True)
    assert again.entries["pkg/a,b.py"] == record_digest(b"new")
    assert sha256_of_digest(record_digest(b"new")) == \
        hashlib.sha256(b"new").hexdigest()
