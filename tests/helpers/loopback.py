"""A real HTTP server on 127.0.0.1 in a thread, for tests that need one."""

from __future__ import annotations

import ssl
import subprocess
import threading
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class _Server(ThreadingHTTPServer):
    # a keep-alive connection's handler waits for the client: not joined
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (a timeout test) is not news


@contextmanager
def loopback(handler: Any, *, wrap: ssl.SSLContext | None = None) -> Iterator[str]:
    """Serve ``handler`` (a request handler class or factory) on a free port;
    yields the base URL, and shuts the server down on leaving. ``wrap``, a
    server-side TLS context, serves HTTPS (the URL still says http://)."""
    server = _Server(("127.0.0.1", 0), handler)
    if wrap is not None:
        server.socket = wrap.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for ``localhost`` (openssl) and its key, in ``folder``:
    ``SSL_CERT_FILE`` for the client, ``load_cert_chain`` for :func:`loopback`."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True)
    return cert, key
