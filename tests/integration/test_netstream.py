"""TLS reads drained (stacklock.netstream), through the one client against a
real TLS server on 127.0.0.1: the bytes are the server's, records that have
arrived come in one read, and a connection cut short still fails."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from stacklock.http import make_http_client
from stacklock.netstream import DRAIN
from tests.helpers.loopback import loopback, self_signed

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

BODY = bytes(range(256)) * 4096  # 1 MiB
RECORD = 16384  # the most plaintext one TLS record carries
ASK = 65536  # what httpcore asks one read for
WRITTEN = threading.Event()  # the server has handed the whole body to its socket


class _Body(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        cut = self.path == "/cut"
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY[: len(BODY) // 2] if cut else BODY)
        WRITTEN.set()
        if cut:
            self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def tls_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with loopback(_Body, wrap=context) as base:
        yield base.replace("http://127.0.0.1", "https://localhost")


def test_records_that_have_arrived_come_in_one_read(tls_base: str) -> None:
    """Once the server has written the body (or filled the socket's buffers,
    when they hold less), one read hands out more than httpcore asked for, and
    no more than DRAIN; the body is the server's, twice over the same
    kept-alive connection."""
    with make_http_client() as http:
        for _ in range(2):
            WRITTEN.clear()
            with http.stream("GET", tls_base + "/body") as response:
                WRITTEN.wait(5)  # not set: the buffers are full, as good
                chunks = list(response.iter_raw())
            assert b"".join(chunks) == BODY
            assert ASK < max(map(len, chunks)) <= DRAIN


def test_a_body_cut_short_still_fails(tls_base: str) -> None:
    """The server sends half the body and closes: the extra reads meet the
    end and leave it to the next read, which fails as before."""
    with make_http_client() as http, pytest.raises(httpx.RemoteProtocolError):
        http.get(tls_base + "/cut")


def test_plain_http_reads_are_the_server_s() -> None:
    with loopback(_Body) as base, make_http_client() as http:
        assert http.get(base + "/body").content == BODY
