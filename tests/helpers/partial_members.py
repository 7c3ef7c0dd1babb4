"""The recorded real zip members of tests/data/native/partial/.

Written by scripts/record_partial.py."""

from __future__ import annotations

import functools
import hashlib
import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARTIAL = Path(__file__).resolve().parent.parent / "data" / "native" / "partial"


@dataclass(frozen=True)
class Member:
    """One real member: its compressed bytes as the wheel holds them, what its
    central directory entry says, and the facts a whole read gives."""

    path: str
    raw: bytes
    crc: int
    size: int
    record: dict[str, Any]

    @functools.cached_property
    def whole(self) -> bytes:
        return zlib.decompress(self.raw, -15)

    def zip_file(self) -> bytes:
        """A one-member zip of it, as recorded."""
        return zip_of([(self.path, self.raw, self.crc, self.size, 8)])


def zip_of(members: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A zip of (path, data as stored, CRC-32, size, method) members: local
    headers and data, central directory, end record; what the directory says
    is what each tuple says (a test may make it lie)."""
    body, central = b"", b""
    for path, data, crc, size, method in members:
        name = path.encode()
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0,
                               method, 0, 0, crc, len(data), size, len(name), 0, 0,
                               0, 0, 0, len(body)) + name
        body += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0, crc,
                            len(data), size, len(name), 0) + name + data
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(members),
                      len(members), len(central), len(body), 0)
    return body + central + end


@dataclass(frozen=True)
class Recorded:
    """A large member as the partial reader read it: the wheel's size, its
    directory entry, and the range requests made, each with its answer."""

    path: str
    size: int
    entry: dict[str, Any]
    requests: dict[tuple[int, int], bytes]
    record: dict[str, Any]


@functools.cache
def recorded_reads() -> tuple[Recorded, ...]:
    index = json.loads((PARTIAL / "spans.json").read_text("utf-8"))
    out = []
    for r in index:
        blob = (PARTIAL / r["file"]).read_bytes()
        answers, at = {}, 0
        for offset, length in r["requests"]:
            answers[(offset, length)] = blob[at:at + length]
            at += length
        out.append(Recorded(path=r["entry"]["name"], size=r["size"], entry=r["entry"],
                            requests=answers, record=r))
    return tuple(out)


def facts_digest(facts: dict[str, Any]) -> str:
    """What scripts/record_partial.py records: SHA-256 of the canonical JSON."""
    blob = json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


@functools.cache
def members() -> tuple[Member, ...]:
    index = json.loads((PARTIAL / "members.json").read_text("utf-8"))
    return tuple(Member(path=r["path"], raw=(PARTIAL / r["file"]).read_bytes(),
                        crc=r["crc"], size=r["size"], record=r) for r in index)
