"""Record real HTTP traffic once, replay it in hermetic tests.

A cassette is a directory::

    <dir>/cassette.json      {"version": 1, "entries": [ENTRY, ...]}
    <dir>/bodies/<sha256>    a response body, raw bytes
    <dir>/bodies/<sha256>.gz the same, gzip-compressed (used for bodies > 32 KiB)

and each ENTRY is::

    {"method": "GET", "url": "https://pypi.org/simple/torch/",
     "range": "bytes=-65536" or null,        # the request's Range header
     "accept": "application/vnd..." or null, # the request's Accept header
     "status": 206,
     "headers": [["content-type", "..."], ...],
     "body": "<sha256 of the body>"}

Requests are matched on method + URL (credentials stripped) + Range header; when
several entries match (the same page asked for as JSON and as HTML), the one whose
Accept header is equal wins, else the first. Bodies are stored decoded: a recorded
``Content-Encoding`` is dropped and ``Content-Length`` set to the stored body, so
replayed responses are self-consistent. HEAD entries keep the server's
``Content-Length`` (the size of the resource), with an empty body. Redirects are
recorded hop by hop, since httpx sends each hop through the transport.

``ReplayTransport(dir)`` serves a cassette and raises :class:`CassetteMiss` (an
AssertionError, so no retry loop swallows it) on any request it does not hold.
``RecordingTransport(dir, inner)`` sends requests through ``inner`` (for example
``httpx.HTTPTransport(retries=2)``) and saves every response; ``save()`` is called
after each request, so an interrupted recording keeps what it has.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

__all__ = ["CassetteMiss", "RecordingTransport", "ReplayTransport", "request_key",
           "seed_metadata"]

VERSION = 1
COMPRESS_OVER = 32 * 1024
_DROP = {"content-encoding", "transfer-encoding", "connection", "keep-alive",
         "set-cookie"}


class CassetteMiss(AssertionError):
    """A request the cassette does not hold: record it, or fix the test."""


def _clean_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=netloc, fragment=""))


def request_key(request: httpx.Request) -> tuple[str, str, str | None]:
    return (request.method.upper(), _clean_url(str(request.url)),
            request.headers.get("range"))


def _load(root: Path) -> list[dict]:
    path = root / "cassette.json"
    if not path.is_file():
        return []
    data = json.loads(path.read_text("utf-8"))
    if data.get("version") != VERSION:
        raise ValueError(f"{path}: unknown cassette version {data.get('version')!r}")
    return list(data["entries"])


class ReplayTransport(httpx.BaseTransport):
    """Serves a recorded cassette; ``served`` lists the keys asked for, in order."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.entries = _load(self.root)
        if not self.entries:
            raise ValueError(f"{self.root}: empty or missing cassette")
        self.served: list[tuple[str, str, str | None]] = []
        self.bytes_served = 0
        self._lock = threading.Lock()

    def _body(self, digest: str) -> bytes:
        raw = self.root / "bodies" / digest
        if raw.is_file():
            return raw.read_bytes()
        return gzip.decompress((self.root / "bodies" / f"{digest}.gz").read_bytes())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key = request_key(request)
        found = [e for e in self.entries
                 if (e["method"], e["url"], e["range"]) == key]
        if not found:
            raise CassetteMiss(
                f"not in cassette {self.root}: {key[0]} {key[1]} range={key[2]}")
        accept = request.headers.get("accept")
        entry = next((e for e in found if e.get("accept") == accept), found[0])
        body = self._body(entry["body"])
        with self._lock:
            self.served.append(key)
            self.bytes_served += len(body)
        headers = [(k, v) for k, v in entry["headers"]]
        if request.method.upper() == "HEAD":
            body = b""
        return httpx.Response(entry["status"], headers=headers, content=body,
                              request=request)

    def unused(self) -> list[tuple[str, str, str | None]]:
        """Recorded requests no test asked for (a sign the cassette is stale)."""
        asked = set(self.served)
        return [(e["method"], e["url"], e["range"]) for e in self.entries
                if (e["method"], e["url"], e["range"]) not in asked]


class RecordingTransport(httpx.BaseTransport):
    """Sends through ``inner`` and records each response into ``root``."""

    def __init__(self, root: str | os.PathLike[str],
                 inner: httpx.BaseTransport | None = None) -> None:
        self.root = Path(root)
        self.inner = inner or httpx.HTTPTransport(retries=2)
        self.entries = _load(self.root)
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        try:
            body = response.read()  # decoded per Content-Encoding
        finally:
            response.close()
        headers = [(k.lower(), v) for k, v in response.headers.multi_items()
                   if k.lower() not in _DROP]
        is_head = request.method.upper() == "HEAD"
        if not is_head:
            headers = [(k, v) for k, v in headers if k != "content-length"]
            headers.append(("content-length", str(len(body))))
        digest = hashlib.sha256(body).hexdigest()
        entry = {
            "method": request.method.upper(),
            "url": _clean_url(str(request.url)),
            "range": request.headers.get("range"),
            "accept": request.headers.get("accept"),
            "status": response.status_code,
            "headers": headers,
            "body": digest,
        }
        with self._lock:
            self._store_body(digest, body)
            same = [i for i, e in enumerate(self.entries)
                    if (e["method"], e["url"], e["range"], e.get("accept")) ==
                    (entry["method"], entry["url"], entry["range"], entry["accept"])]
            if same:
                self.entries[same[0]] = entry
            else:
                self.entries.append(entry)
            self.save()
        return httpx.Response(response.status_code, headers=headers, content=body,
                              request=request)

    def _store_body(self, digest: str, body: bytes) -> None:
        folder = self.root / "bodies"
        folder.mkdir(parents=True, exist_ok=True)
        if len(body) > COMPRESS_OVER:
            path, data = folder / f"{digest}.gz", gzip.compress(body, mtime=0)
        else:
            path, data = folder / digest, body
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        entries = sorted(self.entries, key=lambda e: (
            e["url"], e["method"], e["range"] or "", e.get("accept") or ""))
        text = json.dumps({"version": VERSION, "entries": entries}, indent=1,
                          sort_keys=True)
        tmp = self.root / "cassette.json.tmp"
        tmp.write_text(text + "\n", "utf-8")
        tmp.replace(self.root / "cassette.json")

    def close(self) -> None:
        self.inner.close()


class Layered(httpx.BaseTransport):
    """Cassettes read in order, the first that has the request answers it: a
    cassette recorded with ``scripts/record_resolution.py --base`` holds only what
    its base lacks (cuda-mix over torch-cu130)."""

    def __init__(self, *layers: ReplayTransport) -> None:
        self.layers = layers

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for layer in self.layers[:-1]:
            try:
                return layer.handle_request(request)
            except CassetteMiss:
                continue
        return self.layers[-1].handle_request(request)


def seed_metadata(cassette: str | os.PathLike[str], cache: Path) -> None:
    """Put the METADATA files a ``--metadata`` recording kept
    (``metadata.json.gz``, see scripts/record_resolution.py) into the
    metadata cache of ``cache``, as the recorded resolution left them."""
    files = json.loads(gzip.decompress(
        (Path(cassette) / "metadata.json.gz").read_bytes()))
    folder = cache / "metadata"
    folder.mkdir(parents=True, exist_ok=True)
    for key, text in files.items():
        (folder / f"{key}.metadata").write_text(text, "utf-8")
