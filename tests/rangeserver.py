"""A loopback HTTP server for files in one folder, answering ``Range`` the way
files.pythonhosted.org does (206 with Content-Range), or ignoring it
(``honour_range=False``: 200 with the whole file). ``sent`` counts body bytes
written to clients, so tests can check how little was read."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Served:
    url: str
    sent: list[int] = field(default_factory=list)
    ranges: list[str] = field(default_factory=list)


@contextmanager
def serve_folder(folder: Path, *, honour_range: bool = True) -> Iterator[Served]:
    served = Served(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = folder / self.path.lstrip("/")
            if not path.is_file():
                self.send_error(404)
                return
            body = path.read_bytes()
            spec = self.headers.get("Range")
            served.ranges.append(spec or "")
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", spec or "")
            if honour_range and match:
                first = int(match.group(1))
                last = min(int(match.group(2) or len(body) - 1), len(body) - 1)
                if first >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.end_headers()
                    return
                chunk = body[first:last + 1]
                self.send_response(206)
                self.send_header("Content-Range",
                                 f"bytes {first}-{last}/{len(body)}")
            else:
                chunk = body
                self.send_response(200)
            self.send_header("Content-Length", str(len(chunk)))
            self.end_headers()
            try:
                # in pieces, so a client that stops early leaves the rest unsent
                for start in range(0, len(chunk), 4096):
                    self.wfile.write(chunk[start:start + 4096])
                    served.sent.append(len(chunk[start:start + 4096]))
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
