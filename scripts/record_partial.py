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
_fblas, torchcodec's vendored libjpeg).

For each member named in SPANS (large ones: a whole copy would be MBs), reads
it the way the native check does (``stacklock.native.partial.read_members`` on
that member alone) and writes ``spans-<n>.bin``: the bytes of every range
request it made, with an entry in ``spans.json`` (the wheel's size, the
member's directory entry, each request's offset and length, and the facts a
whole read gives, as above). The test replays those requests and nothing else;
when the reader comes to ask for other bytes, record again. Nothing here is
typed by hand.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tomllib
import zlib
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklock.http import make_http_client  # noqa: E402
from stacklock.metadata import remote_zip  # noqa: E402
from stacklock.metadata.ranges import RangeReader  # noqa: E402
from stacklock.native.elf import parse_shared_object  # noqa: E402
from stacklock.native.partial import read_members  # noqa: E402

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

SPANS = [
    ("sglang-0.5.23-",
     "sglang/srt/rust_extensions/_server.cpython-312-x86_64-linux-gnu.so"),
    ("nccl_extensions-0.1.0-", "nccl/m2n/lib/cu12/libnccl_m2n.so"),
    ("numpy-2.3.5-", "numpy.libs/libscipy_openblas64_-fdde5778.so"),
    ("uvloop-", "uvloop/loop.cpython-312-x86_64-linux-gnu.so"),
    ("torchvision-0.29.2-", "torchvision.libs/libnvjpeg.4a0b5c81.so.13"),
    ("hf_xet-", "hf_xet/hf_xet.abi3.so"),
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


def _facts_of(reader: RangeReader, entry: remote_zip.Entry) -> dict[str, object]:
    start = remote_zip.data_start(reader, entry)
    whole = zlib.decompress(reader.fetch(start, entry.compressed_size), -15)
    assert zlib.crc32(whole) == entry.crc and len(whole) == entry.size
    found = parse_shared_object(io.BytesIO(whole), path=entry.name)
    assert found is not None
    return found.to_dict()


def _record_spans(http: httpx.Client, n: int, prefix: str,
                  path: str) -> dict[str, object]:
    wheel = _wheel(prefix)
    lister = RangeReader(http, wheel["url"], on_bytes=lambda _n: None)
    assert lister.open_tail(64 << 10)
    entry = next(e for e in remote_zip.read_entries(lister) if e.name == path)
    asked: list[tuple[int, bytes]] = []

    def keep(request: httpx.Request) -> httpx.Response:
        response = http.send(request)
        response.read()
        first = int(response.headers["content-range"].split()[1].split("-")[0])
        asked.append((first, response.content))
        return response

    reader = RangeReader(httpx.Client(transport=httpx.MockTransport(keep)),
                         wheel["url"], on_bytes=lambda _n: None)
    reader.open_known(lister.size)
    found = read_members(reader, [entry])[path]
    assert not isinstance(found, Exception) and found is not None, found
    facts = _facts_of(lister, entry)
    assert found.to_dict() == facts
    name = f"spans-{n}.bin"
    (OUT / name).write_bytes(b"".join(body for _at, body in asked))
    print(f"{path}: {sum(len(b) for _a, b in asked)} bytes in {len(asked)} requests")
    return {"file": name, "wheel": wheel, "size": lister.size,
            "entry": {k: getattr(entry, k) for k in (
                "name", "flags", "method", "crc", "compressed_size",
                "header_offset", "extra_len", "size")},
            "requests": [[at, len(body)] for at, body in asked],
            "facts_sha256": facts_digest(facts),
            "needed": facts["needed"], "soname": facts["soname"]}


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
    with make_http_client() as http:
        spans = [_record_spans(http, n, prefix, path)
                 for n, (prefix, path) in enumerate(SPANS)]
    (OUT / "spans.json").write_text(json.dumps(spans, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
