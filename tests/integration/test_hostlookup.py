"""Each host looked up once per client, a late answer asked again beside it, and
TLS still checked against the host's name: with real threads, a real HTTP and a
real HTTPS server on the loopback, the system resolver counted."""

from __future__ import annotations

import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

import httpcore
import httpx
import pytest

from stacklock.hostlookup import ATTEMPTS, LookupOnceBackend, Lookups
from stacklock.http import make_http_client
from tests.helpers.loopback import loopback, self_signed

if TYPE_CHECKING:
    from pathlib import Path

ADDRESS = [(socket.AF_INET, "192.0.2.7")]


class _Close(BaseHTTPRequestHandler):
    """Answers every request and closes the connection: each request a new one."""

    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hosts the system resolver is asked for, numeric addresses left out."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "localhost":
            asked.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_threads_asking_for_one_host_share_one_lookup() -> None:
    calls: list[str] = []
    release = threading.Event()

    def lookup(host: str, port: int) -> list[tuple[int, str]]:
        calls.append(host)
        release.wait(5)
        return ADDRESS

    lookups = Lookups(lookup, hedge_after=60)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(
        lookups.addresses("pypi.org", 443))) for _ in range(8)]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join()
    assert calls == ["pypi.org"]
    assert got == [ADDRESS] * 8
    assert lookups.addresses("pypi.org", 443) == ADDRESS  # kept: not asked again
    assert calls == ["pypi.org"]


def test_a_late_answer_is_asked_again_beside_it_and_the_first_answer_wins() -> None:
    stuck = threading.Event()  # never set: the first question's answer is lost
    calls = 0

    def lookup(host: str, port: int) -> list[tuple[int, str]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            stuck.wait(30)
            return [(socket.AF_INET, "198.51.100.1")]
        return ADDRESS

    assert Lookups(lookup, hedge_after=0.01).addresses("pypi.org", 443) == ADDRESS
    assert calls == 2
    stuck.set()


def test_a_failed_lookup_raises_and_is_not_kept() -> None:
    answers: list[list[tuple[int, str]] | OSError] = [
        socket.gaierror(socket.EAI_NONAME, "Name or service not known"), ADDRESS]

    def lookup(host: str, port: int) -> list[tuple[int, str]]:
        answer = answers.pop(0)
        if isinstance(answer, OSError):
            raise answer
        return answer

    lookups = Lookups(lookup, hedge_after=60)
    with pytest.raises(socket.gaierror, match="not known"):
        lookups.addresses("pypi.org", 443)
    assert lookups.addresses("pypi.org", 443) == ADDRESS  # asked again
    assert answers == []


def test_a_lookup_that_raises_something_else_is_raised_not_waited_for() -> None:
    def lookup(host: str, port: int) -> list[tuple[int, str]]:
        raise UnicodeError("label empty or too long")  # as getaddrinfo("a..b")

    with pytest.raises(UnicodeError, match="label empty"):
        Lookups(lookup, hedge_after=0.01).addresses("a..b", 443)


def test_a_name_no_question_answers_fails_after_every_attempt() -> None:
    calls = 0

    def lookup(host: str, port: int) -> list[tuple[int, str]]:
        nonlocal calls
        calls += 1
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure")

    with pytest.raises(socket.gaierror, match="Temporary failure"):
        Lookups(lookup, hedge_after=60).addresses("pypi.org", 443)
    assert calls == 1  # the resolver said no: not asked again at once
    assert ATTEMPTS > 1


def test_the_client_looks_a_host_up_once_for_many_connections(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _counted(monkeypatch)
    with loopback(_Close) as base, make_http_client() as http:
        url = base.replace("127.0.0.1", "localhost")
        for _ in range(5):
            response = http.get(url + "/x")
            assert response.status_code == 200
            assert response.content == b"ok"
    assert asked == ["localhost"]


def test_a_name_that_does_not_resolve_is_httpcores_connect_error() -> None:
    def lookup(host: str, port: int) -> list[tuple[int, str]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    backend = LookupOnceBackend(Lookups(lookup))
    with pytest.raises(httpcore.ConnectError, match="not known"):
        backend.connect_tcp("no-such-host.invalid", 443, timeout=1)


def test_the_next_address_is_tried_when_one_refuses() -> None:
    """The name's first address refuses (nothing listens on 127.0.0.2), the
    second answers: the connection goes there, as socket.create_connection's."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        both = [(socket.AF_INET, "127.0.0.2"), (socket.AF_INET, "127.0.0.1")]
        backend = LookupOnceBackend(Lookups(lambda host, port: both))
        stream = backend.connect_tcp("example.test", port, timeout=2)
        assert stream.get_extra_info("socket").getpeername() == ("127.0.0.1", port)
        stream.close()
        dead = LookupOnceBackend(Lookups(lambda host, port: both[:1]))
        with pytest.raises(httpcore.ConnectError):
            dead.connect_tcp("example.test", port, timeout=2)


def test_tls_checks_the_host_name_not_the_address_connected_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The certificate names localhost and no address: the connection goes to
    the looked-up address, the certificate is checked against the name."""
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    asked = _counted(monkeypatch)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with loopback(_Close, wrap=context) as base, make_http_client() as http:
        url = base.replace("http://127.0.0.1", "https://localhost")
        assert http.get(url + "/a").content == b"ok"
        assert http.get(url + "/b").content == b"ok"
        with pytest.raises(httpx.ConnectError, match="certificate"):
            http.get(base.replace("http://", "https://") + "/by-address")
    assert asked == ["localhost"]


class _Proxy(BaseHTTPRequestHandler):
    """A forward proxy for plain HTTP that answers itself: it says which
    absolute URL it was asked for."""

    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        body = f"proxied {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_proxy_from_the_environment_is_used_and_the_host_not_looked_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY is honoured beside the lookup-once backend: the request goes
    to the proxy (an absolute URL), and the origin's name is never asked for
    (it does not resolve: only the proxy could answer)."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with loopback(_Proxy) as base:
        for name in ("HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(name, base)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        with make_http_client() as http:
            response = http.get("http://index.invalid/simple/six/")
    assert response.text == "proxied http://index.invalid/simple/six/"
    assert "index.invalid" not in asked
