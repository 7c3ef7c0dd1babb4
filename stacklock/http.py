"""The one HTTP client module: making the client, credentials, limits, and the one
retry policy. Everything stacklock fetches (index pages, METADATA files and range
reads, sdists, downloads, NVIDIA's pages) goes through an ``httpx.Client`` made
by :func:`make_http_client` and, for a whole body, through :func:`get`.

- **The client**: redirects followed, a User-Agent naming stacklock, timeouts per
  read and per connect, a bounded connection pool. Proxies (``HTTPS_PROXY``,
  ``NO_PROXY``) and CA certificates (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) come
  from the environment, as httpx reads them; an unreadable CA setting is one line.
  The TLS context is made once per CA setting and process, on a thread
  (:func:`prepare_tls`): reading a CA bundle takes ~20 ms with the GIL released,
  so resolve and check start it before loading their other modules.
- **Credentials** (:class:`Credentials`): Basic auth for every request to an
  index's origin (scheme, host, port): from the index URL's user info, from
  ``STACKLOCK_INDEX_<NAME>_USERNAME`` / ``_PASSWORD``, or from netrc for the
  request's host. Never sent to another origin (httpx drops the header on a
  redirect to another host), never written anywhere.
- **Limits** (:class:`Limits`): a cap on a body's decoded size and a deadline per
  request (not per read: a server that drips one byte at a time is cut off).
- **Retries** (:class:`Retry`, :func:`transient`): one classifier decides what is
  worth another attempt (connection errors, timeouts, resets, 408, 429, 5xx);
  capped exponential backoff with jitter; ``Retry-After`` honoured, capped.
"""

from __future__ import annotations

import email.utils
import math
import netrc
import os
import random
import re
import ssl
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import unquote

import httpcore
import httpx

from stacklock import __version__
from stacklock.bounded import shorten
from stacklock.errors import StacklockError
from stacklock.hostlookup import LookupOnceBackend
from stacklock.urls import redact_text
from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterable, Mapping

__all__ = [
    "CONNECT_TIMEOUT",
    "MAX_CONNECTIONS",
    "RETRY_STATUS",
    "TIMEOUT",
    "USER_AGENT",
    "BodyTooLarge",
    "Credentials",
    "DeadlineExceeded",
    "Limits",
    "RetriesExhausted",
    "Retry",
    "describe_http_error",
    "get",
    "header_int",
    "is_network_failure",
    "make_http_client",
    "prepare_tls",
    "retry_after",
    "run_deadline",
    "transient",
]

# statuses worth asking again for: rate limits and server-side trouble
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# Connections a run's client keeps open, and so the resolver's prefetch threads.
MAX_CONNECTIONS = 10
TIMEOUT = 30.0  # seconds a request may wait to read, write or get a connection
CONNECT_TIMEOUT = 10.0  # seconds to connect
USER_AGENT = f"stacklock/{__version__}"
T = TypeVar("T")


# -- limits ---------------------------------------------------------------------


class BodyTooLarge(httpx.TransportError):
    """A body decoded past :attr:`Limits.max_bytes` (a gzip bomb, a wrong URL)."""


class DeadlineExceeded(httpx.TimeoutException):
    """A request still unfinished at its deadline (a server that drips)."""


def _positive(variable: str, text: str, kind: type[float] = float, *,
              hint: str | None = None) -> float:
    """The number ``text`` of the environment's ``variable``: finite and above
    zero (``nan``, ``inf``, a word, an integer of thousands of digits are
    errors naming the variable, its value shortened)."""
    try:
        value = kind(text)
    except ValueError:  # not a number, or an int() of over 4,300 digits
        value = -1
    if not 0 < value < math.inf:  # nan compares false
        raise StacklockError(f"{variable}={shorten(text, 40)}: expected a finite "
                             "number > 0",
                             hint=hint or f"unset {variable}, or give e.g. 600")
    return value


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What one whole-body request may cost: ``max_bytes`` decoded, ``deadline``
    seconds from sending it to the last byte. The defaults come from
    ``STACKLOCK_MAX_BODY_BYTES`` and ``STACKLOCK_HTTP_TIMEOUT`` where set."""

    max_bytes: int = 64 << 20
    deadline: float = 120.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        out = cls()
        for variable, key, kind in (("STACKLOCK_MAX_BODY_BYTES", "max_bytes", int),
                                    ("STACKLOCK_HTTP_TIMEOUT", "deadline", float)):
            text = environ.get(variable)
            if not text:
                continue
            value = _positive(variable, text, kind, hint=f"unset {variable} for the "
                              f"default ({getattr(out, key)})")
            out = cls(**{**out.__dict__, key: value})
        return out


# -- retries --------------------------------------------------------------------


class RetriesExhausted(httpx.HTTPError):
    """Every attempt met a transient failure; ``problem`` says the last one,
    ``attempts`` how many were made, ``response`` the last answer (if any)."""

    def __init__(self, problem: str, *, attempts: int,
                 response: httpx.Response | None = None) -> None:
        super().__init__(f"{problem} (after {counted(attempts, 'attempt')})")
        self.problem = problem
        self.attempts = attempts
        self.response = response


def describe_http_error(exc: httpx.HTTPError) -> str:
    """A one-line cause for an error message, with no credentials in it."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return redact_text(text)


def is_network_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says the network or the host failed (refused, reset, timed
    out, 429 or 5xx on every attempt, too slow for a deadline) rather than the
    request: what exit code 3 reports. A refusal (4xx), a redirect loop, a bad URL
    or a body over its cap is the input's."""
    if isinstance(exc, RetriesExhausted):
        return True
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in RETRY_STATUS
    if isinstance(exc, (BodyTooLarge, httpx.UnsupportedProtocol, httpx.InvalidURL,
                        httpx.TooManyRedirects, httpx.LocalProtocolError)):
        return False
    return isinstance(exc, (httpx.TransportError, httpx.TimeoutException))


def transient(outcome: BaseException | httpx.Response) -> str | None:
    """The one classifier: why ``outcome`` (an answer or an exception) is worth
    another attempt, or None when it is not."""
    if isinstance(outcome, httpx.HTTPStatusError):  # raise_for_status()'s
        outcome = outcome.response
    if isinstance(outcome, httpx.Response):
        code = outcome.status_code
        return f"HTTP {code}" if code in RETRY_STATUS else None
    if isinstance(outcome, (DeadlineExceeded, BodyTooLarge, httpx.UnsupportedProtocol,
                            httpx.LocalProtocolError)):
        return None
    if isinstance(outcome, httpx.TimeoutException):
        return f"timed out ({type(outcome).__name__})"
    if isinstance(outcome, (httpx.TransportError, httpx.DecodingError)):
        return f"{type(outcome).__name__}: {outcome}"
    return None


def header_int(value: str) -> int | None:
    """A header's count (Content-Length, a Content-Range total): its digits,
    19 at most (int() refuses a crafted header's thousands), else None."""
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 19 \
        else None


def retry_after(response: httpx.Response, *, now: float | None = None
                ) -> float | None:
    """Seconds the server asks to wait (``Retry-After``: seconds or an HTTP
    date), None when it says nothing usable."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True, kw_only=True)
class Retry:
    """How often to try and how long to wait in between: ``backoff`` seconds
    before the second attempt, doubling after that, never more than
    ``max_delay``, each wait stretched or shrunk by up to ``jitter`` (a
    fraction) so that parallel clients do not retry in step. A ``Retry-After``
    answer is honoured up to ``max_retry_after``. ``total`` (seconds, by
    ``clock``) ends the attempts early when the next wait would pass it.
    ``sleep``, ``clock`` and ``random`` are what tests replace."""

    attempts: int = 3
    backoff: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    jitter: float = 0.25
    total: float | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    random: Callable[[], float] = field(default=random.random)

    def delay(self, attempt: int, asked: float | None = None) -> float:
        """The wait before attempt number ``attempt`` (2, 3, ...); ``asked``:
        what the server's ``Retry-After`` said."""
        wait = float(min(self.backoff * 2 ** (attempt - 2), self.max_delay))
        wait *= 1 + self.jitter * (2 * self.random() - 1)
        if asked is not None:
            wait = max(wait, min(asked, self.max_retry_after))
        return wait

    def call(self, attempt: Callable[[int], T]) -> T:
        """``attempt(n)`` for n = 1, 2, ... until it returns an answer or raises
        an error that :func:`transient` does not retry; a transient outcome on the
        last attempt raises :class:`RetriesExhausted` (from the last error)."""
        deadline = None if self.total is None else self.clock() + self.total
        n = 1
        while True:
            response: httpx.Response | None = None
            try:
                result = attempt(n)
            except Exception as exc:
                reason = transient(exc)
                if reason is None:
                    raise
                failure: BaseException | None = exc
                asked = None
            else:
                if not isinstance(result, httpx.Response):
                    return result
                reason = transient(result)
                if reason is None:
                    return result
                failure, response, asked = None, result, retry_after(result)
            wait = self.delay(n + 1, asked)
            late = deadline is not None and self.clock() + wait > deadline
            if n >= self.attempts or late:
                if late:
                    reason += f"; gave up within the {self.total:g} s allowed"
                raise RetriesExhausted(reason, attempts=n,
                                       response=response) from failure
            self.sleep(wait)
            n += 1


# -- credentials ----------------------------------------------------------------


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, port


def _env_name(index: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", index.upper())


class Credentials(httpx.Auth):
    """Basic credentials for the origins of a run's indexes, and netrc's.

    For a request that carries none: the request URL's own user info, else the
    index whose origin (scheme, host, port) it goes to (its URL's user info, or
    ``STACKLOCK_INDEX_<NAME>_USERNAME`` / ``_PASSWORD``), else netrc's entry for
    the host (``$NETRC`` or ``~/.netrc``). Thread-safe; nothing is logged."""

    def __init__(self, indexes: Iterable[tuple[str, str]] = (), *,
                 netrc_file: Path | None = None,
                 environ: Mapping[str, str] = os.environ) -> None:
        self._by_origin: dict[tuple[str, str, int | None], tuple[str, str]] = {}
        self._environ = environ
        self._netrc_file = netrc_file
        self._netrc: netrc.netrc | bool | None = False  # False: not read yet
        self._lock = threading.Lock()
        for name, url in indexes:
            self.add_index(name, url)

    def add_index(self, name: str, url: str) -> None:
        """Remember the credentials of index ``name`` at ``url``, if any."""
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            return  # the index client reports a bad URL with its profile key
        if parsed.scheme not in ("http", "https"):
            return
        user = self._environ.get(f"STACKLOCK_INDEX_{_env_name(name)}_USERNAME")
        password = self._environ.get(f"STACKLOCK_INDEX_{_env_name(name)}_PASSWORD")
        if parsed.username or parsed.password:
            found = (unquote(parsed.username), unquote(parsed.password))
        elif user is not None or password is not None:
            found = (user or "", password or "")
        else:
            return
        with self._lock:
            self._by_origin.setdefault(_origin(parsed), found)

    def lookup(self, url: httpx.URL) -> tuple[str, str] | None:
        """The credentials a request to ``url`` carries, if any."""
        if url.username or url.password:
            return unquote(url.username), unquote(url.password)
        with self._lock:
            found = self._by_origin.get(_origin(url))
        return found if found is not None else self._from_netrc(url.host)

    def _from_netrc(self, host: str) -> tuple[str, str] | None:
        with self._lock:
            if self._netrc is False:
                self._netrc = self._read_netrc()
            table = self._netrc
        if not isinstance(table, netrc.netrc) or not host:
            return None
        entry = table.authenticators(host)
        if not entry:
            return None
        return entry[0] or "", entry[2] or ""

    def _read_netrc(self) -> netrc.netrc | None:
        path = self._netrc_file or Path(
            self._environ.get("NETRC") or Path.home() / ".netrc")
        try:
            return netrc.netrc(str(path)) if Path(path).is_file() else None
        except (OSError, netrc.NetrcParseError) as exc:
            raise StacklockError(f"{path}: unreadable netrc ({exc})",
                                 hint="fix the file, or point NETRC at another "
                                      "one") from None

    def auth_flow(self, request: httpx.Request
                  ) -> Generator[httpx.Request, httpx.Response, None]:
        found = None if "authorization" in request.headers else self.lookup(
            request.url)
        if found is None:
            yield request
            return
        yield from httpx.BasicAuth(*found).auth_flow(request)


# -- the client -----------------------------------------------------------------


# Contexts by CA setting (SSL_CERT_FILE, SSL_CERT_DIR), each built once per
# process on a thread of its own: reading a CA bundle takes ~20 ms, the GIL
# released, so a command that calls prepare_tls() before loading the rest of
# its modules finds the context built by the time it makes its client.
_TLS: dict[tuple[str, str], Future[ssl.SSLContext]] = {}
_TLS_LOCK = threading.Lock()


def _tls_setting() -> tuple[str, str]:
    return os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", "")


def _build_tls(setting: tuple[str, str], built: Future[ssl.SSLContext]) -> None:
    try:
        built.set_result(httpx.create_ssl_context(trust_env=True))
    except BaseException as exc:  # told by _ssl_context, in the thread that asks
        with _TLS_LOCK:
            _TLS.pop(setting, None)  # a setting mended later is read again
        built.set_exception(exc)


def prepare_tls() -> None:
    """Start building the TLS context of this environment's CA setting (httpx's
    own: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle) on a
    thread, unless it is built or being built: :func:`make_http_client` then
    takes it without waiting for the certificates to load."""
    _tls_future()


def _tls_future() -> Future[ssl.SSLContext]:
    setting = _tls_setting()
    with _TLS_LOCK:
        built = _TLS.get(setting)
        if built is None:
            built = _TLS[setting] = Future()
            threading.Thread(target=_build_tls, args=(setting, built),
                             name="stacklock-tls", daemon=True).start()
    return built


def _ssl_context() -> ssl.SSLContext:
    """The context of :func:`prepare_tls`, with an unreadable setting turned
    into one line."""
    try:
        return _tls_future().result()
    except (OSError, ssl.SSLError) as exc:
        variable = "SSL_CERT_FILE" if os.environ.get("SSL_CERT_FILE") else \
            "SSL_CERT_DIR"
        where = os.environ.get(variable, "")
        raise StacklockError(
            f"{variable}={where}: no CA certificates could be read "
            f"({getattr(exc, 'strerror', None) or exc})",
            hint=f"point {variable} at PEM CA certificates, or unset it for "
                 "certifi's") from None


def _look_up_once(client: httpx.Client) -> httpx.Client:
    """``client`` with its own connections made through :class:`LookupOnceBackend`
    (each host looked up once per client); the proxies' transports that httpx
    made from the environment are left as they are. httpx takes no network
    backend, and taking a transport of ours would switch its environment
    proxies off: the one place stacklock sets an attribute inside httpx, pinned
    by tests/integration/test_hostlookup.py (one lookup for many connections;
    HTTP_PROXY honoured)."""
    transport = client._transport
    pool = getattr(transport, "_pool", None)
    if isinstance(transport, httpx.HTTPTransport) and \
            type(pool) is httpcore.ConnectionPool:  # not a proxy's pool
        pool._network_backend = LookupOnceBackend()
    return client


def run_deadline(seconds: float, *, clock: Callable[[], float] = time.monotonic
                 ) -> Callable[[httpx.Request], None]:
    """A request hook that refuses every request sent more than ``seconds``
    after it was made: a whole run's deadline (a resolve against an index that
    answers every request just in time would otherwise never end)."""
    ends = clock() + seconds

    def check(request: httpx.Request) -> None:
        if clock() > ends:
            raise DeadlineExceeded(
                f"the run passed its {seconds:g} s (STACKLOCK_RUN_TIMEOUT raises it)",
                request=request)

    return check


def make_http_client(*, timeout: float = TIMEOUT,
                     credentials: Credentials | None = None,
                     transport: httpx.BaseTransport | None = None,
                     run_seconds: float | None = None) -> httpx.Client:
    """The one client a run shares; ``credentials`` default to netrc's alone.
    ``transport`` is a test's (a ``MockTransport``). ``run_seconds`` (default
    ``STACKLOCK_RUN_TIMEOUT``, else none) bounds the whole run's requests."""
    if run_seconds is None and os.environ.get("STACKLOCK_RUN_TIMEOUT"):
        run_seconds = _positive("STACKLOCK_RUN_TIMEOUT",
                                os.environ["STACKLOCK_RUN_TIMEOUT"])
    hooks = {"request": [run_deadline(run_seconds)]} if run_seconds else {}
    client = httpx.Client(
        event_hooks=hooks,
        headers={"User-Agent": USER_AGENT},
        timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
        limits=httpx.Limits(max_connections=MAX_CONNECTIONS,
                            max_keepalive_connections=MAX_CONNECTIONS),
        follow_redirects=True,
        auth=credentials if credentials is not None else Credentials(),
        verify=True if transport is not None else _ssl_context(),
        transport=transport,
        trust_env=True,
    )
    return client if transport is not None else _look_up_once(client)


def get(http: httpx.Client, url: str, *, headers: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        read_body: Callable[[int], bool] | None = None) -> httpx.Response:
    """GET ``url`` and read its body within ``limits`` (default: from the
    environment); returns the answer with ``content`` set. ``read_body(status)``
    False leaves the body unread (a range read answered 200: the whole file).
    Raises httpx's errors, :class:`BodyTooLarge` and :class:`DeadlineExceeded`."""
    limits = limits or Limits.from_env()
    ends = time.monotonic() + limits.deadline
    request = http.build_request("GET", url, headers=headers,
                                 timeout=_within(http.timeout, limits.deadline))
    response = http.send(request, stream=True, follow_redirects=True)
    try:
        if read_body is not None and not read_body(response.status_code):
            return response
        # pieces joined once at the end: no growing buffer copied again
        # (a range read's 8 MiB body was made twice over)
        pieces: list[bytes] = []
        got = 0
        encoding = response.headers.get("content-encoding", "identity").lower()
        # an identity body's bytes are its raw bytes: no decoder to pass them
        # through (a range read of a wheel, ~1.5 ms of CPU per MB less)
        plain = encoding in ("", "identity")
        # a body already in memory (an in-memory transport's) has no raw
        # stream left: iter_bytes hands out what was read
        raw = plain and not response.is_stream_consumed
        for chunk in response.iter_raw() if raw else response.iter_bytes():
            pieces.append(chunk)
            got += len(chunk)
            if got > limits.max_bytes:
                raise BodyTooLarge(
                    f"the body passed {limits.max_bytes} bytes decoded "
                    "(STACKLOCK_MAX_BODY_BYTES raises the cap)", request=request)
            if time.monotonic() > ends:
                raise DeadlineExceeded(
                    f"still reading after {limits.deadline:g} s "
                    "(STACKLOCK_HTTP_TIMEOUT raises the deadline)", request=request)
        # a connection that closes early raises on its own; this catches an
        # answer cut short by what sits in front of it (identity bodies only:
        # an encoded one's length is not the decoded body's)
        declared = header_int(response.headers.get("content-length", ""))
        if plain and declared is not None and got < declared:
            raise httpx.RemoteProtocolError(  # what a real connection raises
                f"truncated body: {got} of {declared} bytes", request=request)
    finally:
        response.close()
    kept = [(k, v) for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length",
                                 "transfer-encoding")]
    return httpx.Response(response.status_code, headers=kept, content=b"".join(pieces),
                          request=response.request, history=response.history)


def _within(timeout: httpx.Timeout, deadline: float) -> httpx.Timeout:
    """The client's timeouts, none longer than the deadline."""
    def cap(value: float | None) -> float:
        return deadline if value is None else min(value, deadline)

    return httpx.Timeout(connect=cap(timeout.connect), read=cap(timeout.read),
                         write=cap(timeout.write), pool=cap(timeout.pool))
