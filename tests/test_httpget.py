"""stacklock.httpget against a real loopback HTTP server: the pool path of a
PooledClient (stacklock.httppool) and the plain-httpx path give the same answers
(redirects, Basic auth, gzip, range reads left unread, errors), and each raises
httpx's exceptions. The server is http.server in a thread; nothing is mocked."""

from __future__ import annotations

import base64
import gzip
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING

import httpx
import pytest

from stacklock.http import make_http_client
from stacklock.httpget import MAX_REDIRECTS, PooledClient, fetch_early, get
from tests.helpers.loopback import loopback

if TYPE_CHECKING:
    from collections.abc import Iterator

BODY = b'{"meta": {"api-version": "1.1"}, "files": []}' * 200
SEEN: list[dict[str, str]] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", **headers: str) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        SEEN.append({"path": self.path, **headers})
        path = self.path
        if path == "/page":
            self._send(200, BODY, Content_Type="application/json", ETag='"v1"')
        elif path == "/gzip":
            self._send(200, gzip.compress(BODY), Content_Encoding="gzip")
        elif path == "/hop":
            self._send(302, Location="/page")
        elif path == "/elsewhere":
            self._send(307, Location=f"http://localhost:{self.server.server_port}/page")
        elif path == "/loop":
            self._send(302, Location="/loop")
        elif path == "/range":
            wanted = self.headers.get("Range", "")
            if wanted == "bytes=-10":
                size = len(BODY)
                self._send(206, BODY[-10:],
                           Content_Range=f"bytes {size - 10}-{size - 1}/{size}")
            else:
                self._send(200, BODY)
        elif path == "/short":  # promises more than it sends, then hangs up
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY[:100])
            self.close_connection = True
        elif path == "/slow":
            time.sleep(0.6)
            self._send(200, BODY)
        else:
            self._send(404, b"not here")


@pytest.fixture
def base() -> Iterator[str]:
    SEEN.clear()
    with loopback(Handler) as url:
        yield url


@pytest.fixture(params=["pool", "httpx"])
def http(request, monkeypatch) -> Iterator[httpx.Client]:
    """The client make_http_client makes (its own pool) and, with a proxy named
    in the environment, the same client without one (httpx sends)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                 "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    if request.param == "httpx":
        # a proxy the loopback requests skip (NO_PROXY): httpx sends them itself
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with make_http_client(timeout=5.0) as client:
        assert isinstance(client, PooledClient)
        assert (client.pool is None) == (request.param == "httpx")
        yield client


def test_page_and_headers(base, http):
    reply = get(http, f"{base}/page", headers={"Accept": "application/json"})
    assert (reply.status_code, reply.content, reply.url) == (200, BODY, f"{base}/page")
    assert reply.headers["etag"] == '"v1"' and reply.history == ()
    assert reply.wire_bytes == len(BODY)
    sent = SEEN[-1]
    assert sent["accept"] == "application/json"
    assert sent["user-agent"].startswith("stacklock/")


def test_gzip_is_decoded(base, http):
    reply = get(http, f"{base}/gzip")
    assert reply.content == BODY
    assert reply.wire_bytes == len(gzip.compress(BODY))


def test_redirect_followed_and_auth_kept_on_the_same_origin(base, http):
    reply = get(http, f"{base}/hop", basic=("bob", "hunter2"))
    assert reply.content == BODY and reply.url == f"{base}/page"
    assert reply.history == (f"{base}/hop",)
    token = "Basic " + base64.b64encode(b"bob:hunter2").decode()
    assert [s.get("authorization") for s in SEEN] == [token, token]


def test_auth_is_dropped_on_another_origin(base, http):
    reply = get(http, f"{base}/elsewhere", basic=("bob", "hunter2"))
    assert reply.status_code == 200 and "localhost" in reply.url
    assert SEEN[0].get("authorization") and "authorization" not in SEEN[1]


def test_user_info_in_the_url_is_sent_as_basic_auth(base, http):
    host = base.removeprefix("http://")
    reply = get(http, f"http://alice:s%40cret@{host}/page")
    assert reply.status_code == 200
    assert SEEN[-1]["authorization"] == "Basic " + base64.b64encode(
        b"alice:s@cret").decode()


def test_redirect_loop_raises_httpx_too_many_redirects(base, http):
    with pytest.raises(httpx.TooManyRedirects):
        get(http, f"{base}/loop")
    assert len(SEEN) == MAX_REDIRECTS + 1


def test_range_read_and_a_200_left_unread(base, http):
    def wanted(status: int) -> bool:
        return status == 206

    part = get(http, f"{base}/range", headers={"Range": "bytes=-10"},
               read_body=wanted)
    assert (part.status_code, part.content) == (206, BODY[-10:])
    whole = get(http, f"{base}/range", headers={"Range": "bytes=0-5"},
                read_body=wanted)
    assert (whole.status_code, whole.content) == (200, b"")


def test_status_errors(base, http):
    reply = get(http, f"{base}/missing")
    assert reply.status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as caught:
        reply.raise_for_status()
    assert caught.value.response.status_code == 404


def test_truncated_body_is_a_transport_error(base, http):
    with pytest.raises(httpx.RemoteProtocolError):
        get(http, f"{base}/short")


def test_timeout_is_httpx_timeout(base, http):
    # the fixture's environment (proxy or not) holds for this client too
    with make_http_client(timeout=0.2) as quick:
        assert (quick.pool is None) == (http.pool is None)
        with pytest.raises(httpx.ReadTimeout):
            get(quick, f"{base}/slow")


def test_refused_connection_is_httpx_connect_error(http):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        get(http, f"http://127.0.0.1:{port}/page")


def test_unsupported_scheme(http):
    with pytest.raises(httpx.UnsupportedProtocol):
        get(http, "ftp://example.org/x")


def test_a_corrupt_gzip_body_is_a_decoding_error():
    from stacklock.httpget import _decode

    assert _decode(gzip.compress(b"abc"), "gzip") == b"abc"
    with pytest.raises(httpx.DecodingError):
        _decode(b"not gzip at all", "gzip")
    with pytest.raises(httpx.DecodingError):
        _decode(b"x", "br")


def _early(base: str, *urls: str, headers: dict[str, str]) -> None:
    from stacklock.http import ssl_context

    fetch_early([f"{base}{u}" for u in urls], headers, context=ssl_context,
                user_agent="stacklock/test",
                timeout={"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0})


def test_an_early_get_answers_the_same_request_once(base):
    with make_http_client(timeout=5.0) as http:
        assert http.pool is not None
        _early(base, "/page", headers={"Accept": "application/json"})
        first = get(http, f"{base}/page", headers={"Accept": "application/json"})
        assert (first.status_code, first.content) == (200, BODY)
        assert len(SEEN) == 1  # the early request was the only one sent
        assert SEEN[0]["user-agent"] == "stacklock/test"
        again = get(http, f"{base}/page", headers={"Accept": "application/json"})
        assert again.content == BODY and len(SEEN) == 2  # taken once only


def test_an_early_get_is_not_used_for_another_request(base):
    with make_http_client(timeout=5.0) as http:
        _early(base, "/page", headers={"Accept": "application/json"})
        while len(SEEN) < 1:  # the early one reached the server
            time.sleep(0.01)
        other = get(http, f"{base}/page", headers={"Accept": "text/html"})
        assert other.content == BODY and len(SEEN) == 2
        assert SEEN[1]["accept"] == "text/html"
        with_auth = get(http, f"{base}/page", headers={"Accept": "application/json"},
                        basic=("bob", "hunter2"))
        assert with_auth.status_code == 200 and "authorization" in SEEN[2]
