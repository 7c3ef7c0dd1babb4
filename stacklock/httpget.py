"""One GET, read whole: the request a resolution sends hundreds of times.

A cold resolution of sglang sends ~420 GETs (173 index pages, 83 MB in all, and
~250 range reads of wheel tails). Through ``httpx.Client`` each costs ~0.3 ms of
CPU in the client and transport layers before httpcore sends it, and every 16 KB
TLS record of a body passes through httpx's stream wrappers and decoders: 1.3 s of
CPU for those 420 requests on a 2-core machine, against 0.95 s straight through
httpcore, the connection pool httpx itself sends with. So :func:`get` sends
through the httpcore pool of a :class:`PooledClient` (what
:func:`stacklock.http.make_http_client` makes), following redirects, setting
Basic auth and decoding gzip/deflate itself, and answers with a :class:`Reply`.
Given any other ``httpx.Client`` (the ``MockTransport`` of a test, a client behind
a proxy) it asks that client and answers with the same :class:`Reply`, so callers
do not know which path ran. Failures raise httpx's exceptions either way.
"""

from __future__ import annotations

import base64
import threading
import zlib
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpcore
import httpx

from stacklock.hostnames import CachingBackend

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["MAX_REDIRECTS", "PooledClient", "Reply", "fetch_early", "get"]

MAX_REDIRECTS = 20  # httpx's default
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class PooledClient(httpx.Client):
    """An ``httpx.Client`` that also carries the httpcore ``pool`` :func:`get`
    sends through (sharing the client's SSL context); ``pool`` is None where the
    environment names a proxy, and :func:`get` then asks the client."""

    def __init__(self, *, pool: httpcore.ConnectionPool | None,
                 **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.pool = pool

    def close(self) -> None:
        super().close()
        if self.pool is not None:
            self.pool.close()


@dataclass(frozen=True, kw_only=True)
class Reply:
    """A complete answer: the final ``url`` (after redirects), the ones passed
    on the way (``history``), and the body as sent over the wire (``wire_bytes``,
    before any decoding). ``content`` is empty when ``read_body`` declined it."""

    url: str
    status_code: int
    headers: httpx.Headers
    content: bytes
    history: tuple[str, ...] = ()
    wire_bytes: int = 0

    def raise_for_status(self) -> None:
        """httpx's HTTPStatusError for a 4xx or 5xx answer."""
        if self.status_code < 400:
            return
        request = httpx.Request("GET", self.url)
        response = httpx.Response(self.status_code, headers=self.headers,
                                  request=request)
        kind = "Client" if self.status_code < 500 else "Server"
        raise httpx.HTTPStatusError(
            f"{kind} error '{self.status_code}' for url '{self.url}'",
            request=request, response=response)


def get(
    http: httpx.Client,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    basic: tuple[str, str] | None = None,
    read_body: Callable[[int], bool] | None = None,
) -> Reply:
    """GET ``url``, redirects followed; ``basic`` is (login, password) for
    Basic auth (URL user info is used when given). ``read_body(status)`` False
    leaves the body unread (a range read answered 200: the whole file)."""
    pool = getattr(http, "pool", None)
    if pool is None:
        return _via_client(http, url, headers or {}, basic, read_body)
    if basic is None and read_body is None and _early:
        early = _take_early(url, headers or {})
        if early is not None:
            return early
    return _via_pool(pool, url, headers or {}, basic, read_body,
                     base=http.headers.items(), timeout=http.timeout.as_dict())


# -- GETs sent before the client exists ----------------------------------------
# (url, the request's own headers) -> the answer on its way; taken once
_early: dict[tuple[str, tuple[tuple[str, str], ...]], Future[Reply]] = {}
_early_lock = threading.Lock()


def fetch_early(urls: Sequence[str], headers: Mapping[str, str], *,
                context: Callable[[], ssl.SSLContext], user_agent: str,
                timeout: Mapping[str, float]) -> None:
    """Start GETs of ``urls`` (no credentials) in threads, each on a pool of
    its own, before the run's client exists; :func:`get` of the same URL with
    the same headers (and no auth) takes the answer, waiting for one in flight,
    instead of asking again. A failed one is simply asked again. ``context``
    gives the SSL context (called in the threads: it may still be loading)."""
    for url in urls:
        future: Future[Reply] = Future()
        with _early_lock:
            if _early.setdefault(_early_key(url, headers), future) is not future:
                continue  # already on its way

        def one(url: str = url, future: Future[Reply] = future) -> None:
            try:
                with httpcore.ConnectionPool(ssl_context=context(),
                                             network_backend=CachingBackend()) as pool:
                    future.set_result(_via_pool(
                        pool, url, headers, None, None,
                        base=(("User-Agent", user_agent),), timeout=timeout))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=one, name="stacklock-early-get", daemon=True).start()


def _early_key(url: str, headers: Mapping[str, str]
               ) -> tuple[str, tuple[tuple[str, str], ...]]:
    return url, tuple(sorted((k.lower(), v) for k, v in headers.items()))


def _take_early(url: str, headers: Mapping[str, str]) -> Reply | None:
    with _early_lock:
        future = _early.pop(_early_key(url, headers), None)
    if future is None:
        return None
    try:
        return future.result()
    except Exception:  # sent again, with the caller's retries
        return None


def _via_client(http: httpx.Client, url: str, headers: Mapping[str, str],
                basic: tuple[str, str] | None,
                read_body: Callable[[int], bool] | None) -> Reply:
    kwargs: dict[str, object] = {"headers": dict(headers), "follow_redirects": True}
    if basic is not None:
        kwargs["auth"] = httpx.BasicAuth(*basic)
    with http.stream("GET", url, **kwargs) as response:  # type: ignore[arg-type]
        wanted = read_body is None or read_body(response.status_code)
        body = response.read() if wanted else b""
        return Reply(url=str(response.url), status_code=response.status_code,
                     headers=response.headers, content=body,
                     history=tuple(str(r.url) for r in response.history),
                     wire_bytes=response.num_bytes_downloaded)


def _via_pool(pool: httpcore.ConnectionPool, url: str,
              headers: Mapping[str, str], basic: tuple[str, str] | None,
              read_body: Callable[[int], bool] | None, *,
              base: Iterable[tuple[str, str]], timeout: Mapping[str, float | None]
              ) -> Reply:
    url, basic = _split_userinfo(url, basic)
    defaults = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in base
                if k.lower() not in ("accept-encoding", "connection")]
    own = {k.lower(): v for k, v in headers.items()}
    own.setdefault("accept-encoding", "gzip, deflate")
    sent = [(k, v) for k, v in defaults if k.decode("latin-1").lower() not in own]
    sent += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in own.items()]
    auth = None if basic is None else (
        b"authorization",
        b"Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()))
    extensions = {"timeout": dict(timeout)}
    history: list[str] = []
    origin = _origin(url)
    while True:
        request_headers = sent + ([auth] if auth and _origin(url) == origin else [])
        try:
            with pool.stream("GET", url, headers=request_headers,
                             extensions=extensions) as response:
                status = response.status
                answer = httpx.Headers(response.headers)
                location = answer.get("location")
                if status in _REDIRECTS and location:
                    body = b""
                elif read_body is not None and not read_body(status):
                    body = b""
                else:
                    body = b"".join(response.iter_stream())
        except httpcore.UnsupportedProtocol as exc:
            raise httpx.UnsupportedProtocol(str(exc)) from exc
        except (httpcore.TimeoutException, httpcore.NetworkError,
                httpcore.ProtocolError, httpcore.ProxyError) as exc:
            kind = getattr(httpx, type(exc).__name__, httpx.TransportError)
            raise kind(str(exc) or type(exc).__name__) from exc
        if status in _REDIRECTS and location:
            if len(history) >= MAX_REDIRECTS:
                raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.")
            history.append(url)
            url = urljoin(url, location)
            continue
        return Reply(url=url, status_code=status, headers=answer,
                     content=_decode(body, answer.get("content-encoding", "")),
                     history=tuple(history), wire_bytes=len(body))


def _split_userinfo(url: str, basic: tuple[str, str] | None
                    ) -> tuple[str, tuple[str, str] | None]:
    """The URL without user info, and the credentials to send (the URL's win,
    as in httpx)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, basic
    userinfo, _, host = parts.netloc.rpartition("@")
    login, _, password = userinfo.partition(":")
    return (urlunsplit(parts._replace(netloc=host)),
            (unquote(login), unquote(password)))


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def _decode(body: bytes, encoding: str) -> bytes:
    """The body with its Content-Encoding undone (gzip and deflate, what the
    request offers); raises httpx.DecodingError for a corrupt one."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity") or not body:
        return body
    if encoding not in ("gzip", "deflate", "x-gzip"):
        raise httpx.DecodingError(f"unsupported Content-Encoding {encoding!r}")
    # 47: a gzip or zlib header, detected; deflate sent raw needs -15
    problem: zlib.error | None = None
    for wbits in ((47,) if encoding != "deflate" else (47, -15)):
        try:
            decoder = zlib.decompressobj(wbits)
            return decoder.decompress(body) + decoder.flush()
        except zlib.error as exc:
            problem = exc
    raise httpx.DecodingError(f"corrupt {encoding} body: {problem}")
