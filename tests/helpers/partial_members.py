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
        """A one-member zip of it (local header, data, central directory,
        end record), the member's bytes and directory entry as recorded."""
        name = self.path.encode()
        local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 8, 0, 0, self.crc,
                            len(self.raw), self.size, len(name), 0) + name
        central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 8, 0,
                              0, self.crc, len(self.raw), self.size, len(name), 0, 0,
                              0, 0, 0, 0) + name
        at = len(local) + len(self.raw)
        end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), at, 0)
        return local + self.raw + central + end


def facts_digest(facts: dict[str, Any]) -> str:
    """What scripts/record_partial.py records: SHA-256 of the canonical JSON."""
    blob = json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


@functools.cache
def members() -> tuple[Member, ...]:
    index = json.loads((PARTIAL / "members.json").read_text("utf-8"))
    return tuple(Member(path=r["path"], raw=(PARTIAL / r["file"]).read_bytes(),
                        crc=r["crc"], size=r["size"], record=r) for r in index)
