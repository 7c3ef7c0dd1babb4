"""A loopback file server for the install tests, and the helpers they share.

It serves bytes from a dict on 127.0.0.1, honours ``Range`` (as the CUDA CDN
does), and can be told to cut a response short, to be slow, or to hand out a
tampered copy: the three things install must survive. The ``server`` fixture in
``tests/conftest.py`` runs one per test (:func:`serve`).
"""

from __future__ import annotations

import hashlib
import threading
import time
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomlkit

if TYPE_CHECKING:
    from collections.abc import Iterator

DATA = Path(__file__).resolve().parents[1] / "data" / "install"
SMALL_LOCK = DATA / "pylock.small.toml"


@dataclass
class Served:
    """What the server hands out and how; tests change it between requests."""

    files: dict[str, bytes] = field(default_factory=dict)
    cut_after: dict[str, int] = field(default_factory=dict)  # path -> bytes, once
    delay: dict[str, float] = field(default_factory=dict)  # path -> seconds/chunk
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # sent with every file
    started: threading.Event = field(default_factory=threading.Event)
    # "Basic ..." every GET must carry (else 401), as a private index answers
    authorization: str | None = None
    unauthorized: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    served: Served

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        body = self.served.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()

    def do_GET(self) -> None:
        served = self.served
        rng = self.headers.get("Range")
        served.requests.append((self.path, rng))
        if served.authorization and \
                self.headers.get("Authorization") != served.authorization:
            served.unauthorized.append(self.path)
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="private"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = served.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = 0
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            self.send_response(206)
            self.send_header(
                "Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}"
            )
        else:
            self.send_response(200)
        kind = "text/html" if self.path.endswith("/") else "application/octet-stream"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body) - start))
        self.send_header("Accept-Ranges", "bytes")
        for key, value in served.headers.items():
            self.send_header(key, value)
        self.end_headers()
        chunk = body[start:]
        cut = served.cut_after.pop(self.path, None)
        if cut is not None:
            self.wfile.write(chunk[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        delay = served.delay.get(self.path)
        if delay:
            served.started.set()
            try:
                for i in range(0, len(chunk), 1024):
                    self.wfile.write(chunk[i : i + 1024])
                    self.wfile.flush()
                    time.sleep(delay)
            except OSError:  # the client was killed: expected
                self.close_connection = True
            return
        self.wfile.write(chunk)


@contextmanager
def serve() -> Iterator[tuple[str, Served]]:
    """(base URL, Served) of a loopback server, stopped on leaving."""
    served = Served()
    handler = type("Handler", (_Handler,), {"served": served})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", served
    finally:
        httpd.shutdown()
        httpd.server_close()


def local_lock(base: str, served: Served, dest: Path, *, tamper: str = "") -> Path:
    """The recorded lock with its URLs on the loopback server, wheels served.

    ``tamper`` names a wheel whose served bytes get one byte changed.
    """
    data = tomllib.loads(SMALL_LOCK.read_text("utf-8"))
    for pkg in data["packages"]:
        pkg.pop("sdist", None)
        for wheel in pkg["wheels"]:
            name = wheel["url"].rsplit("/", 1)[-1]
            body = (DATA / "wheels" / name).read_bytes()
            if name.startswith(tamper) and tamper:
                # the first entry's modification time: the zip stays readable,
                # only the sha256 can tell
                body = body[:10] + bytes([body[10] ^ 1]) + body[11:]
            served.files[f"/files/{name}"] = body
            wheel["url"] = f"{base}/files/{name}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(tomlkit.dumps(data), "utf-8")
    return dest


def tree_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under ``root`` (not following symlinks) with size, mtime, target."""
    out: dict[str, tuple[int, int, str]] = {}
    if not root.exists() and not root.is_symlink():
        return out
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        link = str(path.readlink()) if path.is_symlink() else ""
        out[str(path.relative_to(root.parent))] = (st.st_size, st.st_mtime_ns, link)
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
