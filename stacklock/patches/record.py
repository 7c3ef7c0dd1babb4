"""A package's patches applied in order, and the RECORD that tells of it.

RECORD (the wheel spec; PEP 376/627 once installed) lists each file with
``sha256=<urlsafe base64, no padding>`` and its size. Install rewrites the lines
of the files it patched, and only those, so the installed RECORD is true again:
``importlib.metadata``, pip and uv (which read it to uninstall) and validate see
the patched files as the distribution's own.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from typing import TYPE_CHECKING

from stacklock.errors import PatchError
from stacklock.patches.apply import apply_file

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from stacklock.patches.model import Patch

__all__ = ["apply_patches", "digest_of_sha256", "parse_record", "record_digest",
           "rewrite_record", "sha256_of_digest"]


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


def parse_record(text: str) -> dict[str, str]:
    """RECORD's ``path -> sha256=...`` (rows without a hash left out)."""
    out = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) == 3 and row[1]:
            out[row[0]] = row[1]
    return out


def rewrite_record(text: str, changed: Mapping[str, bytes]) -> str:
    """``text`` (a RECORD) with the rows of ``changed``'s paths giving their new
    bytes' digest and size; every other line kept as it is."""
    out = []
    for line in io.StringIO(text, newline=""):
        rows = list(csv.reader([line]))
        row = rows[0] if rows else []
        if len(row) == 3 and row[0] in changed:
            data = changed[row[0]]
            buffer = io.StringIO()
            ending = line[len(line.rstrip("\r\n")):] or ""
            csv.writer(buffer, lineterminator=ending).writerow(
                [row[0], record_digest(data), str(len(data))])
            line = buffer.getvalue()
        out.append(line)
    return "".join(out)


def apply_patches(files: Mapping[str, bytes], patches: Sequence[tuple[Patch, str]],
                  *, package: str, version: str) -> tuple[dict[str, bytes], list[str]]:
    """The files ``patches`` change (in order: a later patch sees an earlier
    one's result), from ``files`` (every path the patches name, as the wheel
    holds it); and a note per hunk applied away from its header's line. Each
    patch is ``(patch, where)``, ``where`` naming it in errors."""
    current = dict(files)
    changed: dict[str, bytes] = {}
    notes: list[str] = []
    for patch, where in patches:
        for file in patch.files:
            if file.path not in current:
                raise PatchError(f"{package} {version}: {where}: {file.path} is not "
                                 "a file of the wheel")
            applied = apply_file(current[file.path], file, package=package,
                                 version=version, where=where)
            current[file.path] = changed[file.path] = applied.data
            notes.extend(f"{where}: {file.path}: hunk {n} applied {abs(d)} lines "
                         f"{'below' if d > 0 else 'above'} its header's"
                         for n, d in applied.offsets)
    return changed, notes
