"""stacklock.httppool against a real loopback HTTP/1.1 server: connections are
kept and reused, one the server has closed is replaced (idle, or found closed
only when the request goes out), a response that says ``Connection: close`` or
is left unread gives its connection up, chunked bodies are read whole; and a
resolution's GETs import neither httpx nor httpcore (a real subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from stacklock.http import make_http_client
from stacklock.httpget import get
from tests.helpers.loopback import loopback

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[1]
CONNECTIONS: list[int] = []  # client ports, one per connection the server took
REQUESTS: list[str] = []
_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.served = 0
        with _lock:
            CONNECTIONS.append(self.client_address[1])

    def _send(self, body: bytes, *, close: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.served += 1

    def do_GET(self) -> None:
        with _lock:
            REQUESTS.append(self.path)
        if self.path == "/once":  # one answer per connection, then hang up unasked
            if self.served:
                self.close_connection = True
                return
            self._send(b"first")
        elif self.path == "/mute":  # never answers
            self.close_connection = True
        elif self.path == "/close":
            self._send(b"bye", close=True)
        elif self.path == "/quiet-close":  # answers, then closes without saying so
            self._send(b"ok")
            self.close_connection = True
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"abc", b"defg", b"h" * 5000):
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            self.served += 1
        elif self.path.startswith("/simple/"):  # sends the client to a bad port
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:99999/simple/x/")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/big":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 1000)
            self.served += 1
        else:
            self._send(self.path.encode())


@pytest.fixture
def base(monkeypatch) -> Iterator[str]:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                 "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    CONNECTIONS.clear()
    REQUESTS.clear()
    with loopback(Handler) as url:
        yield url


def test_one_connection_serves_many_gets(base):
    with make_http_client(timeout=5.0) as http:
        assert http.pool is not None
        bodies = [get(http, f"{base}/{i}").content for i in range(5)]
    assert bodies == [f"/{i}".encode() for i in range(5)]
    assert len(CONNECTIONS) == 1


def test_an_idle_connection_the_server_closed_is_replaced(base):
    with make_http_client(timeout=5.0) as http:
        assert get(http, f"{base}/quiet-close").content == b"ok"
        deadline = time.monotonic() + 5
        while len(CONNECTIONS) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # the server has hung up by now
        assert get(http, f"{base}/after").content == b"/after"
    assert len(CONNECTIONS) == 2


def test_a_reused_connection_closed_without_an_answer_is_opened_anew(base):
    with make_http_client(timeout=5.0) as http:
        assert get(http, f"{base}/once").content == b"first"
        # the same connection is still open, and the server hangs up on the
        # second request: sent once more on a new connection
        assert get(http, f"{base}/once").content == b"first"
    assert REQUESTS == ["/once"] * 3
    assert len(CONNECTIONS) == 2


def test_a_new_connection_closed_without_an_answer_is_an_error(base):
    with make_http_client(timeout=5.0) as http, \
            pytest.raises(httpx.RemoteProtocolError):
        get(http, f"{base}/mute")
    assert REQUESTS == ["/mute"]  # not sent again on a fresh connection


def test_connection_close_is_honoured(base):
    with make_http_client(timeout=5.0) as http:
        assert get(http, f"{base}/close").content == b"bye"
        assert get(http, f"{base}/x").content == b"/x"
    assert len(CONNECTIONS) == 2


def test_a_body_left_unread_gives_up_its_connection(base):
    with make_http_client(timeout=5.0) as http:
        reply = get(http, f"{base}/big", read_body=lambda status: False)
        assert (reply.status_code, reply.content) == (200, b"")
        assert get(http, f"{base}/x").content == b"/x"
    assert len(CONNECTIONS) == 2


def test_a_chunked_body_is_read_whole_and_the_connection_kept(base):
    with make_http_client(timeout=5.0) as http:
        assert get(http, f"{base}/chunked").content == b"abcdefg" + b"h" * 5000
        assert get(http, f"{base}/x").content == b"/x"
    assert len(CONNECTIONS) == 1


def test_threads_each_take_their_own_connection(base):
    with make_http_client(timeout=5.0) as http:
        results: list[bytes] = []

        def work(i: int) -> None:
            for j in range(5):
                results.append(get(http, f"{base}/{i}-{j}").content)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(results) == sorted(f"/{i}-{j}".encode()
                                     for i in range(4) for j in range(5))
    assert 1 <= len(CONNECTIONS) <= 4


def test_gets_import_neither_httpx_nor_httpcore(base):
    """What a resolution from a PyPI-like index does: the resolver's modules
    and GETs through the run's client, with httpx left unimported; a streamed
    download (the httpx client's job) still works, importing httpx then."""
    script = textwrap.dedent(f"""
        import sys
        import stacklock.resolve.locking, stacklock.resolve.early
        from stacklock.http import make_http_client
        from stacklock.httpget import get
        with make_http_client(timeout=5.0) as http:
            assert get(http, "{base}/page").content == b"/page"
            assert get(http, "{base}/missing-host-port-0").status_code == 200
            light = [m for m in ("httpx", "httpcore", "h11", "anyio")
                     if m in sys.modules]
            with http.stream("GET", "{base}/streamed") as response:
                body = response.read()
        print(light, body, "httpx" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "b'/streamed'", "True"]


def test_a_redirect_to_a_bad_port_is_an_index_error(base, tmp_path):
    from stacklock.errors import IndexError_
    from stacklock.index.client import IndexClient
    from stacklock.profile import IndexSpec

    with make_http_client(timeout=5.0) as http:
        client = IndexClient(http, cache_dir=tmp_path)
        with pytest.raises(IndexError_, match="unsupported URL: Port out of range"):
            client.get_links(IndexSpec(name="m", url=f"{base}/simple"), "x")
