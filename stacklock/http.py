"""The HTTP client every network verb shares, and the one retry policy.

One client per run (one connection pool), made here and passed down to whatever
talks to an index, NVIDIA or a file host. It is a
:class:`stacklock.httpget.PooledClient`: the GETs a resolution sends by the
hundred go straight to its own pool (:mod:`stacklock.httpget`,
:mod:`stacklock.httppool`), and anything else to an ``httpx.Client``. One SSL
context serves the run (:func:`ssl_context`); loading its CA bundle (20-40 ms) can
start early in a thread, beside the imports of a verb (:func:`prepare_ssl_context`):
loading certificates leaves the interpreter lock free. Every loop that retries a
transient failure (index pages, range reads, METADATA files, downloads) draws its
attempts from a :class:`Retry`: the same backoff everywhere, and a ``sleep`` (and
``clock``) that tests replace so retries cost no time.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stacklock import __version__
from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterator

    import httpx

__all__ = ["CONNECT_TIMEOUT", "RETRY_STATUS", "TIMEOUT", "USER_AGENT", "Retry",
           "make_http_client", "prepare_ssl_context", "proxied", "ssl_context"]

# statuses worth asking again for: rate limits and server-side trouble
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


# Connections a run's client keeps open, and so the resolver's prefetch threads
# (stacklock.resolve.source). More is not faster: the threads share one
# interpreter lock, and each connection costs a TLS handshake (~1.5 ms of CPU).
# The 76 GETs of a cold torch + torchvision + torchaudio resolution, replayed on
# 1, 4, 8 and 24 threads, cost 110, 139, 177 and 195 ms of CPU. Resolving that
# set with 8 or 10 connections took 0.60-0.63 s against 0.68 s with 16 (and 24
# threads), medians of 16-20 interleaved runs; sglang 2.25-2.34 s against 2.37 s.
MAX_CONNECTIONS = 10
TIMEOUT = 30.0  # seconds a request may wait to read, write or get a connection
CONNECT_TIMEOUT = 10.0  # seconds to connect
USER_AGENT = f"stacklock/{__version__}"
# what makes httpx send through a proxy; stacklock's own pool then stays unused
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_ssl_job: tuple[threading.Thread | None, list[Any]] | None = None
_ssl_lock = threading.Lock()


def _make_ssl_context() -> ssl.SSLContext:
    """httpx's default context (``httpx.create_ssl_context()``): SSL_CERT_FILE,
    else SSL_CERT_DIR, else certifi's bundle, without importing httpx."""
    import ssl

    for variable in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        where = os.environ.get(variable)
        if where:
            try:
                if variable == "SSL_CERT_FILE":
                    return ssl.create_default_context(cafile=where)
                return ssl.create_default_context(capath=where)
            except (OSError, ssl.SSLError) as exc:
                raise StacklockError(
                    f"{variable}={where}: no CA certificates could be read "
                    f"({exc.strerror or exc})",
                    hint=f"point {variable} at PEM CA certificates, or unset it "
                         "for certifi's") from None
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def proxied() -> bool:
    """Whether the environment names a proxy (httpx would send through it)."""
    return any(os.environ.get(v) or os.environ.get(v.upper())
               for v in _PROXY_VARIABLES)


def prepare_ssl_context() -> None:
    """Start making the run's SSL context in a thread; :func:`ssl_context`
    waits for it (and makes it itself when this was never called)."""
    global _ssl_job
    with _ssl_lock:
        if _ssl_job is not None:
            return
        box: list[Any] = []

        def work() -> None:
            try:
                box.append(_make_ssl_context())
            except BaseException as exc:  # raised again where it is taken
                box.append(exc)

        thread = threading.Thread(target=work, name="stacklock-ssl", daemon=True)
        thread.start()
        _ssl_job = (thread, box)


def ssl_context() -> ssl.SSLContext:
    """The run's one SSL context: the one :func:`prepare_ssl_context` started
    (waited for), else made now. Shared: the early page fetches
    (:mod:`stacklock.resolve.early`) and the client use the same."""
    global _ssl_job
    with _ssl_lock:
        job = _ssl_job
        if job is None:
            _ssl_job = job = (None, [_make_ssl_context()])  # type: ignore[assignment]
    if job[0] is not None:
        job[0].join()
    found = job[1][0]
    if isinstance(found, BaseException):
        with _ssl_lock:  # a later call tries again
            if _ssl_job is job:
                _ssl_job = None
        raise found
    return found  # type: ignore[no-any-return]


def make_http_client(*, timeout: float = TIMEOUT, **kwargs: Any) -> httpx.Client:
    """The one client a run shares: pooled, redirects followed, a per-request
    timeout (connect 10 s), and a User-Agent naming stacklock. Its GETs go
    through :mod:`stacklock.httppool` (:func:`stacklock.httpget.get`); the
    ``httpx.Client`` beside it, for streamed downloads, is made (and httpx
    imported) at its first use, which a resolution from a PyPI-like index never
    reaches. Where the environment names a proxy, or ``kwargs`` give a
    transport, everything goes through httpx, which honours them."""
    import ssl

    from stacklock.httpget import PooledClient

    headers = kwargs.setdefault("headers", {"User-Agent": USER_AGENT})
    pooled = not proxied() and "transport" not in kwargs and "mounts" not in kwargs \
        and "proxy" not in kwargs
    if "verify" not in kwargs and "transport" not in kwargs:
        kwargs["verify"] = ssl_context()
    context = kwargs.get("verify")
    pool = None
    if pooled and isinstance(context, ssl.SSLContext):
        from stacklock.httppool import ConnectionPool

        pool = ConnectionPool(context, max_idle=MAX_CONNECTIONS)

    def make_client() -> httpx.Client:
        import httpx

        options = dict(kwargs)
        options.setdefault("timeout", httpx.Timeout(timeout, connect=CONNECT_TIMEOUT))
        options.setdefault("follow_redirects", True)
        options.setdefault("limits", httpx.Limits(max_connections=MAX_CONNECTIONS))
        return httpx.Client(**options)

    if not any(name.lower() == "accept" for name in headers):
        headers = {"Accept": "*/*", **headers}  # httpx's default
    return PooledClient(pool=pool, headers=headers,
                        make_client=make_client,
                        timeout={"connect": CONNECT_TIMEOUT, "read": timeout,
                                 "write": timeout, "pool": timeout})


@dataclass(frozen=True, kw_only=True)
class Retry:
    """How often to try and how long to wait in between: ``backoff`` seconds
    before the second attempt, doubling after that, never more than
    ``max_delay``. ``total`` (seconds, by ``clock``) ends the attempts early
    when the next wait would pass it."""

    attempts: int = 3
    backoff: float = 0.4
    max_delay: float = 2.0
    total: float | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def delay(self, attempt: int) -> float:
        """The wait before attempt number ``attempt`` (2, 3, ...)."""
        return min(self.backoff * 2 ** (attempt - 2), self.max_delay)

    def __iter__(self) -> Iterator[int]:
        """Attempt numbers 1, 2, ..., waiting before each but the first. It stops
        early (a number below ``attempts`` was the last) when ``total`` would
        be passed; the loop's body decides what is worth another attempt."""
        deadline = None if self.total is None else self.clock() + self.total
        for attempt in range(1, max(1, self.attempts) + 1):
            if attempt > 1:
                delay = self.delay(attempt)
                if deadline is not None and self.clock() + delay > deadline:
                    return
                self.sleep(delay)
            yield attempt

    def is_last(self, attempt: int) -> bool:
        return attempt >= self.attempts
