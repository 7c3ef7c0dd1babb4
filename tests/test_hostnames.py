"""stacklock.hostnames: a host name is looked up once however many connections
and threads want it, a failed lookup is not remembered, and connections made
with the addresses work (a real loopback server; the system resolver is
wrapped to count, never replaced)."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from stacklock import hostnames
from stacklock.http import make_http_client
from stacklock.httpget import get
from tests.helpers.loopback import loopback


@pytest.fixture
def counted(monkeypatch):
    asked: list[str] = []
    real = socket.getaddrinfo

    def counting(host, *args, **kwargs):
        asked.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    monkeypatch.setattr(hostnames, "_found", {})
    return asked


def test_one_lookup_for_many_threads(counted):
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(
        hostnames.lookup("localhost", 443))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counted == ["localhost"]
    assert len(results) == 8 and all(r == results[0] for r in results)
    assert "127.0.0.1" in results[0] or "::1" in results[0]


def test_a_failed_lookup_is_asked_again(counted):
    for _ in range(2):
        with pytest.raises(OSError):
            hostnames.lookup("no-such-host.invalid", 443)
    assert counted == ["no-such-host.invalid"] * 2


def test_the_pool_connects_by_name_through_the_cache(counted, monkeypatch):
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                 "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with loopback(Handler) as base, make_http_client(timeout=5.0) as http:
        port = base.rsplit(":", 1)[1]
        # localhost may name ::1 first, where nobody listens: the next address
        replies = [get(http, f"http://localhost:{port}/{i}") for i in range(3)]
        assert [r.content for r in replies] == [b"ok"] * 3
        assert counted.count("localhost") == 1
        with pytest.raises(httpx.ConnectError):
            get(http, "http://no-such-host.invalid/")
