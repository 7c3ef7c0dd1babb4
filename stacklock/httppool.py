"""Keep-alive HTTP/1.1 connections for :mod:`stacklock.httpget`, on the standard
library's ``http.client``.

The GETs of a resolution need one request and one whole answer each, on
connections kept open. httpcore (with h11, anyio and logging) and httpx cost a
cold resolution ~60 ms of imports before its first request, more than a tenth of
uv's whole run on a small set; ``http.client`` costs ~11 ms, and less CPU per
request. :class:`ConnectionPool` keeps connections per (scheme, host, port): a
thread takes an idle one (dropping any the server has closed meanwhile) or opens
one, sends one GET, reads the answer whole, and gives the connection back unless
the server closes it or the body was left unread. A reused connection that turns
out closed before any answer is opened anew once. Host names are looked up once
per run (:func:`stacklock.hostnames.lookup`).

Failures are raised as httpx's exceptions (``ConnectError``, ``ReadTimeout``,
``RemoteProtocolError``, ...), as httpcore's pool under httpx raised them:
callers catch one family, whichever client sent. httpx is imported then, on the
error path only.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from stacklock.hostnames import lookup

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping, Sequence

__all__ = ["Answer", "ConnectionPool"]

_PORTS = {"http": 80, "https": 443}
_DROPPED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
            ConnectionAbortedError)


@dataclass(frozen=True, slots=True)
class Answer:
    """One response: status, header lines as sent, and the body as it came over
    the wire (empty when it was left unread)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class _Connection(http.client.HTTPConnection):
    """One connection, opened to the addresses :func:`lookup` gives (in order),
    TLS on top for https; the certificate is checked against the host name."""

    def __init__(self, scheme: str, host: str, port: int, *, timeout: float | None,
                 context: ssl.SSLContext | None) -> None:
        super().__init__(host, port, timeout=timeout)
        self.scheme = scheme
        self.default_port = _PORTS[scheme]  # Host: without a port when default
        self._context = context

    def connect(self) -> None:
        last: OSError | None = None
        for address in lookup(self.host, self.port):
            try:
                sock = socket.create_connection((address, self.port), self.timeout)
                break
            except OSError as exc:  # the next address
                last = exc
        else:
            raise last or OSError(f"no address for {self.host}")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._context is not None:
            try:
                sock = self._context.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        self.sock = sock


class ConnectionPool:
    """Idle connections per (scheme, host, port), at most ``max_idle`` each;
    every connection serves one thread at a time. ``context`` is the SSL
    context of https connections."""

    def __init__(self, context: ssl.SSLContext, *, max_idle: int = 10) -> None:
        self._context = context
        self._max_idle = max_idle
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> ConnectionPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the idle connections; ones in use close when given back."""
        with self._lock:
            self._closed = True
            idle = [c for conns in self._idle.values() for c in conns]
            self._idle.clear()
        for conn in idle:
            conn.close()

    def get(self, scheme: str, host: str, port: int | None, target: str,
            headers: Sequence[tuple[str, str]], *, timeout: Mapping[str, float | None],
            wanted: Callable[[int, list[tuple[str, str]]], bool] | None = None,
            ) -> Answer:
        """GET ``target`` (path and query) from ``scheme://host:port``;
        ``wanted(status, headers)`` False leaves the body unread (and the
        connection closed). Raises httpx's exceptions for failures."""
        if scheme not in _PORTS:
            _fail("UnsupportedProtocol",
                  f"Request URL has an unsupported protocol '{scheme}://'.")
        key = (scheme, host, port or _PORTS[scheme])
        conn, reused = self._take(key, timeout)
        try:
            try:
                return self._exchange(conn, target, headers, timeout, wanted)
            except _Retry:
                if not reused:
                    raise
            conn.close()  # closed by the server while idle: once more, anew
            conn = self._open(key, timeout)
            return self._exchange(conn, target, headers, timeout, wanted)
        except _Retry as exc:
            conn.close()
            _fail("RemoteProtocolError",
                  "Server disconnected without sending a response.", exc.__cause__)
        except BaseException:
            conn.close()
            raise

    # -- connections -----------------------------------------------------------
    def _take(self, key: tuple[str, str, int], timeout: Mapping[str, float | None]
              ) -> tuple[_Connection, bool]:
        """An idle connection still open (and True), else a new one."""
        while True:
            with self._lock:
                idle = self._idle.get(key)
                conn = idle.pop() if idle else None
            if conn is None:
                return self._open(key, timeout), False
            if conn.sock is not None and not _readable(conn.sock):
                return conn, True
            conn.close()  # the server hung up (or sent what nobody asked for)

    def _open(self, key: tuple[str, str, int], timeout: Mapping[str, float | None]
              ) -> _Connection:
        scheme, host, port = key
        conn = _Connection(scheme, host, port, timeout=timeout.get("connect"),
                           context=self._context if scheme == "https" else None)
        try:
            conn.connect()
        except TimeoutError as exc:
            conn.close()
            _fail("ConnectTimeout", str(exc) or "timed out", exc)
        except OSError as exc:  # refused, unreachable, no address, TLS refused
            conn.close()
            _fail("ConnectError", str(exc) or type(exc).__name__, exc)
        return conn

    def _give_back(self, key: tuple[str, str, int], conn: _Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not self._closed and len(idle) < self._max_idle:
                idle.append(conn)
                return
        conn.close()

    # -- one exchange ----------------------------------------------------------
    def _exchange(self, conn: _Connection, target: str,
                  headers: Sequence[tuple[str, str]],
                  timeout: Mapping[str, float | None],
                  wanted: Callable[[int, list[tuple[str, str]]], bool] | None,
                  ) -> Answer:
        assert conn.sock is not None
        conn.sock.settimeout(timeout.get("write"))
        try:
            conn.putrequest("GET", target, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            conn.endheaders()
        except TimeoutError as exc:
            _fail("WriteTimeout", str(exc) or "timed out", exc)
        except _DROPPED as exc:
            raise _Retry from exc
        except OSError as exc:
            _fail("WriteError", str(exc) or type(exc).__name__, exc)
        conn.sock.settimeout(timeout.get("read"))
        try:
            response = conn.getresponse()
        except TimeoutError as exc:
            _fail("ReadTimeout", str(exc) or "timed out", exc)
        except _DROPPED as exc:  # nothing came back: safe to send again
            raise _Retry from exc
        except (http.client.HTTPException, OSError) as exc:
            _fail("RemoteProtocolError" if isinstance(exc, http.client.HTTPException)
                  else "ReadError", str(exc) or type(exc).__name__, exc)
        lines = response.getheaders()
        if wanted is not None and not wanted(response.status, lines):
            conn.close()
            return Answer(response.status, lines, b"")
        try:
            body = response.read()
        except TimeoutError as exc:
            _fail("ReadTimeout", str(exc) or "timed out", exc)
        except http.client.IncompleteRead as exc:
            _fail("RemoteProtocolError",
                  f"peer closed connection without sending complete message body: "
                  f"received {len(exc.partial)} bytes", exc)
        except (http.client.HTTPException, OSError) as exc:
            _fail("RemoteProtocolError" if isinstance(exc, http.client.HTTPException)
                  else "ReadError", str(exc) or type(exc).__name__, exc)
        if response.will_close:
            conn.close()
        else:
            self._give_back((conn.scheme, conn.host, conn.port), conn)
        return Answer(response.status, lines, body)


class _Retry(Exception):
    """A reused connection was found closed before any answer came."""


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read: the server closed it
    (or sent what nobody asked for); either way it is not reused."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def _fail(kind: str, message: str, cause: BaseException | None = None) -> NoReturn:
    """Raise httpx's exception class ``kind`` (imported now: errors only)."""
    import httpx

    raise getattr(httpx, kind)(message) from cause
