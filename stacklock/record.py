"""RECORD: the one reader of a wheel's file list, and its digests.

A wheel's ``*.dist-info/RECORD`` lists each of its files as ``path,digest,size``
(CSV; the digest ``sha256=<urlsafe base64, no padding>``); installed (PEP 376/627)
it lists what the installer wrote, relative to site-packages, scripts and data
reached by ``../../../`` (site-packages is three levels below the venv). Resolve
reads a patched wheel's, install and validate the installed one and the locked
wheel's, snapshot and the CUDA finder the installed ones: every one of them
through :func:`parse_record` (or :func:`load_record`, :func:`wheel_record`), which
bounds the size (:data:`MAX_RECORD_BYTES`), the rows (:data:`MAX_RECORD_ROWS`) and
the length of a row (:data:`MAX_ROW`), refuses what is not CSV, a row of other
than three fields, a path that is absolute, holds a control character (NUL) or
leaves its place (a wheel's root; the venv once installed), a digest or size of
another shape and a path listed twice, each as one :class:`RecordError` naming the
file and line. ``tests/unit/test_bounded.py`` fails on a ``csv`` reader, or a
read of a ``RECORD``, anywhere else.

Also here: the digest arithmetic, and the rewrite of the rows of patched files.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacklock.bounded import Malformed, read_regular, shorten
from stacklock.errors import RecordError
from stacklock.words import counted

if TYPE_CHECKING:
    import zipfile
    from collections.abc import Collection, Mapping
    from pathlib import Path

__all__ = [
    "INSTALLED_UP",
    "MAX_RECORD_BYTES",
    "MAX_RECORD_ROWS",
    "MAX_ROW",
    "Record",
    "check_record_size",
    "digest_of_sha256",
    "load_record",
    "parse_record",
    "record_bytes",
    "record_digest",
    "record_name",
    "rewrite_record",
    "sha256_of_digest",
    "wheel_record",
]

# torch's RECORD: 2.5 MB, 16,000 rows; the largest here (flashinfer): 1.4 MB
MAX_RECORD_BYTES = 64 << 20
MAX_RECORD_ROWS = 1_000_000
MAX_ROW = 16 << 10  # characters of one line: a path of PATH_MAX and its digest
MAX_PATH = 4096
# levels above site-packages an installed RECORD's path may go (lib/pythonX.Y/
# site-packages: ../../../bin/ is the venv's bin); a wheel's RECORD: none
INSTALLED_UP = 3
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DIGEST = re.compile(r"[a-z0-9_]{1,32}=[A-Za-z0-9_-]{1,200}={0,2}")
_SIZE = re.compile(r"[0-9]{1,20}")
_NAME = re.compile(r"[^/]+\.dist-info/RECORD")
_WHEEL_HINT = ("the wheel is broken or crafted: check where it came from, or lock "
               "another version")
_INSTALLED_HINT = ("the installed distribution is broken or was changed: install "
                   "the lock again (stacklock install --reinstall)")


@dataclass(frozen=True, kw_only=True)
class Record:
    """A RECORD, read: ``entries`` maps every listed path to its digest ("" for a
    row without one: RECORD itself, a ``.pyc``); ``where`` names it, ``content``
    is the bytes it was read from."""

    where: str
    entries: dict[str, str]
    content: bytes

    @property
    def hashed(self) -> dict[str, str]:
        """The paths listed with a digest."""
        return {path: digest for path, digest in self.entries.items() if digest}


def parse_record(content: bytes, *, where: str, installed: bool) -> Record:
    """The RECORD in ``content`` (see the module doc); ``installed``: as an
    installer wrote it (paths may reach :data:`INSTALLED_UP` levels up), else a
    wheel's own (every path inside the wheel). Anything else is one RecordError
    naming ``where`` and the line."""
    hint = _INSTALLED_HINT if installed else _WHEEL_HINT
    check_record_size(len(content), where=where, installed=installed)
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{where}: not UTF-8 (byte {exc.start:,})",
                          hint=hint) from None
    lines = text.split("\n")
    if len(lines) > MAX_RECORD_ROWS + 1:
        raise RecordError(f"{where}: {len(lines):,} lines, more than "
                          f"{MAX_RECORD_ROWS:,} rows", hint=hint)
    if max(map(len, lines)) > MAX_ROW:
        number = next(i for i, line in enumerate(lines, 1) if len(line) > MAX_ROW)
        raise RecordError(f"{where}: line {number:,}: a row of "
                          f"{len(lines[number - 1]):,} characters (at most "
                          f"{MAX_ROW:,})", hint=hint)
    up = INSTALLED_UP if installed else 0
    entries: dict[str, str] = {}
    reader = csv.reader(lines, strict=True)
    try:
        for row in reader:
            if not row:
                continue
            problem = _row_problem(row, up) or (
                f"{shorten(row[0])} listed twice" if row[0] in entries else None)
            if problem is not None:
                raise RecordError(f"{where}: line {reader.line_num:,}: {problem}",
                                  hint=hint)
            entries[row[0]] = row[1]
    except csv.Error as exc:
        raise RecordError(f"{where}: line {reader.line_num:,}: not CSV ({exc})",
                          hint=hint) from None
    return Record(where=where, entries=entries, content=content)


def _row_problem(row: list[str], up: int) -> str | None:
    if len(row) != 3:
        return (f"{counted(len(row), 'field')}, a RECORD row has 3 (path,digest,size): "
                f"{shorten(','.join(row), 80)}")
    path, digest, size = row
    return (_path_problem(path, up)
            or (None if not digest or _DIGEST.fullmatch(digest) else
                f"a digest that is not algorithm=base64: {shorten(digest, 80)}")
            or (None if not size or _SIZE.fullmatch(size) else
                f"a size that is not a number: {shorten(size, 80)}"))


def _path_problem(path: str, up: int) -> str | None:
    """Why ``path`` is not one an installer may write, or None."""
    if not path:
        return "an empty path"
    if len(path) > MAX_PATH:
        return f"a path of {len(path):,} characters (at most {MAX_PATH:,})"
    control = _CONTROL.search(path)
    if control is not None:
        return (f"a path holding the control character "
                f"{control.group()!r}: {shorten(path, 80)!r}")
    if path.startswith("/"):
        return f"an absolute path: {shorten(path, 80)}"
    depth = 0
    for part in path.split("/"):
        if part == "..":
            depth -= 1
            if depth < -up:
                place = "the venv" if up else "the wheel"
                return f"a path that leaves {place}: {shorten(path, 80)}"
        elif part not in ("", "."):
            depth += 1
    return None


def check_record_size(size: int, *, where: str, installed: bool = False) -> None:
    """Refuse a RECORD of ``size`` bytes (a zip member's, before it is read)
    larger than :data:`MAX_RECORD_BYTES`."""
    if size > MAX_RECORD_BYTES:
        raise RecordError(f"{where}: {size:,} bytes, larger than "
                          f"{MAX_RECORD_BYTES >> 20} MiB",
                          hint=_INSTALLED_HINT if installed else _WHEEL_HINT)


def load_record(dist_info: Path) -> Record | None:
    """The installed RECORD of ``dist_info`` (a regular file, bounded); None
    when there is none."""
    path = dist_info / "RECORD"
    content = record_bytes(dist_info)
    return None if content is None else parse_record(content, where=str(path),
                                                     installed=True)


def record_bytes(dist_info: Path) -> bytes | None:
    """The bytes of the installed RECORD of ``dist_info`` (a regular file, at
    most :data:`MAX_RECORD_BYTES`), not parsed (a snapshot's fingerprint, a
    substring test before a parse); None when there is none."""
    path = dist_info / "RECORD"
    try:
        return read_regular(path, limit=MAX_RECORD_BYTES)
    except FileNotFoundError:
        return None
    except Malformed as exc:  # not a regular file, or too large
        raise RecordError(f"{path}: {exc}", hint=_INSTALLED_HINT) from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot read: {exc.strerror or exc}",
                          hint="check its permissions") from None


def record_name(names: Collection[str], where: str) -> str:
    """The wheel's one top-level ``*.dist-info/RECORD`` among ``names``."""
    found = sorted(n for n in names if _NAME.fullmatch(n))
    if len(found) != 1:
        raise RecordError(f"{where}: expected one *.dist-info/RECORD, found "
                          f"{shorten(str(found or 'none'))}",
                          hint="a wheel holds one RECORD")
    return found[0]


def wheel_record(archive: zipfile.ZipFile, where: str) -> tuple[str, Record]:
    """The RECORD of the wheel open in ``archive`` (its member name, and the
    RECORD), its size checked before it is read."""
    name = record_name(archive.namelist(), where)
    check_record_size(archive.getinfo(name).file_size, where=f"{where}: {name}")
    return name, parse_record(archive.read(name), where=f"{where}: {name}",
                              installed=False)


def record_digest(data: bytes) -> str:
    """RECORD's ``sha256=...`` for ``data``."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def digest_of_sha256(sha256: str) -> str:
    """RECORD's ``sha256=...`` for the hex ``sha256`` a lock records."""
    raw = base64.urlsafe_b64encode(bytes.fromhex(sha256)).rstrip(b"=")
    return "sha256=" + raw.decode("ascii")


def sha256_of_digest(digest: str) -> str | None:
    """The hex sha256 a RECORD digest names, None for another algorithm or a
    malformed one."""
    algorithm, _, value = digest.partition("=")
    if algorithm != "sha256":
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except ValueError:
        return None
    return raw.hex() if len(raw) == 32 else None


def rewrite_record(record: Record, changed: Mapping[str, bytes]) -> bytes:
    """``record``'s bytes with the rows of ``changed``'s paths giving their new
    bytes' digest and size; every other line kept as it is."""
    out = []
    for line in io.StringIO(record.content.decode("utf-8"), newline=""):
        rows = list(csv.reader([line]))
        row = rows[0] if rows else []
        if len(row) == 3 and row[0] in changed:
            data = changed[row[0]]
            buffer = io.StringIO()
            ending = line[len(line.rstrip("\r\n")):]
            csv.writer(buffer, lineterminator=ending).writerow(
                [row[0], record_digest(data), str(len(data))])
            line = buffer.getvalue()
        out.append(line)
    return "".join(out).encode("utf-8")
