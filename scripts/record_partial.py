"""Record the real zip members the partial-inflate tests read.

    .venv/bin/python scripts/record_partial.py

Writes tests/data/native/partial/. For each member named in MEMBERS (a wheel of
``locks/pylock.pypi-cu130.toml`` and a path in it), reads the wheel's central
directory from PyPI by range requests, then the member's compressed bytes whole
(raw deflate, as the zip holds them), and writes ``<n>.deflate`` with an entry in
``members.json``: the wheel (URL, sha256), the member's directory entry (sizes,
CRC-32, method), and the facts a whole read of it gives
(``stacklock.native.elf.parse_shared_object`` over every byte, CRC checked), with
a SHA-256 over their JSON so that a test compares them field for field. The
members were picked for what their streams hold: a stored block and
fixed-Huffman blocks (orjson, numpy's mtrand), window-dependent bytes that never
die out before the dynamic segment (scipy's _superlu), a dynamic segment in the
middle (torchcodec's custom ops), and libraries patchelf rewrote (scipy's
_fblas, torchcodec's vendored libjpeg). Nothing here is typed by hand.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tomllib
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklock.http import make_http_client  # noqa: E402
from stacklock.metadata import remote_zip  # noqa: E402
from stacklock.metadata.ranges import RangeReader  # noqa: E402
from stacklock.native.elf import parse_shared_object  # noqa: E402

OUT = ROOT / "tests" / "data" / "native" / "partial"
LOCK = ROOT / "locks" / "pylock.pypi-cu130.toml"
MEMBERS = [
    ("orjson-3.13.0-", "orjson/orjson.cpython-312-x86_64-linux-gnu.so"),
    ("numpy-2.3.5-", "numpy/random/mtrand.cpython-312-x86_64-linux-gnu.so"),
    ("scipy-1.18.1-",
     "scipy/sparse/linalg/_dsolve/_superlu.cpython-312-x86_64-linux-gnu.so"),
    ("scipy-1.18.1-", "scipy/linalg/_fblas.cpython-312-x86_64-linux-gnu.so"),
    ("torchcodec-0.17.0-", "torchcodec/libtorchcodec_custom_ops4.so"),
    ("torchcodec-0.17.0-", "torchcodec.libs/libjpeg-944920e9.so.8.3.2"),
]


def facts_digest(facts: dict[str, object]) -> str:
    """The SHA-256 of a shared object's facts as canonical JSON."""
    blob = json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _wheel(prefix: str) -> dict[str, str]:
    lock = tomllib.loads(LOCK.read_text("utf-8"))
    found = [w for p in lock["packages"] for w in p.get("wheels", ())
             if w["name"].startswith(prefix)]
    assert len(found) == 1, (prefix, [w["name"] for w in found])
    return {"filename": found[0]["name"], "url": found[0]["url"],
            "sha256": found[0]["hashes"]["sha256"]}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    index = []
    with make_http_client() as http:
        for n, (prefix, path) in enumerate(MEMBERS):
            wheel = _wheel(prefix)
            reader = RangeReader(http, wheel["url"], on_bytes=lambda _n: None)
            assert reader.open_tail(64 << 10)
            entry = next(e for e in remote_zip.read_entries(reader) if e.name == path)
            start = remote_zip.data_start(reader, entry)
            raw = reader.fetch(start, entry.compressed_size)
            whole = zlib.decompress(raw, -15)
            assert zlib.crc32(whole) == entry.crc and len(whole) == entry.size
            found = parse_shared_object(io.BytesIO(whole), path=path)
            assert found is not None
            facts = found.to_dict()
            name = f"{n}.deflate"
            (OUT / name).write_bytes(raw)
            index.append({
                "file": name, "wheel": wheel, "path": path, "method": entry.method,
                "crc": entry.crc, "compressed_size": entry.compressed_size,
                "size": entry.size, "facts_sha256": facts_digest(facts),
                "soname": facts["soname"], "needed": facts["needed"],
                "runpath": facts["runpath"], "undefined": len(found.undefined),
                "exported": len(found.exported),
            })
            print(f"{path}: {len(raw)} bytes")
    (OUT / "members.json").write_text(json.dumps(index, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
