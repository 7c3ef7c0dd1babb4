"""One GET, read whole: the request a resolution sends hundreds of times.

A cold resolution of sglang sends ~420 GETs (173 index pages, 83 MB in all, and
~250 range reads of wheel tails). Through ``httpx.Client`` each costs ~0.3 ms of
CPU in the client and transport layers before the request is sent, and every
16 KB TLS record of a body passes through httpx's stream wrappers and decoders;
importing httpx and httpcore costs ~60 ms before the first request. So
:func:`get` sends through the :class:`stacklock.httppool.ConnectionPool` of a
:class:`PooledClient` (what :func:`stacklock.http.make_http_client` makes),
following redirects, setting Basic auth and decoding gzip/deflate itself, and
answers with a :class:`Reply`. Given any other ``httpx.Client`` (the
``MockTransport`` of a test), or a :class:`PooledClient` without a pool (the
environment names a proxy), it asks the httpx client and answers with the same
:class:`Reply`, so callers do not know which path ran. Failures raise httpx's
exceptions either way.
"""

from __future__ import annotations

import base64
import threading
import zlib
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from stacklock._lazy import lazy_module
from stacklock.httppool import ConnectionPool

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable, Iterator, Sequence

    import httpx
    from httpx import Client as _ClientBase
else:
    _ClientBase = object
    httpx = lazy_module("httpx")

__all__ = ["MAX_REDIRECTS", "Headers", "PooledClient", "Reply", "fetch_early", "get"]

MAX_REDIRECTS = 20  # httpx's default
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class PooledClient(_ClientBase):
    """What :func:`stacklock.http.make_http_client` makes: the
    :class:`ConnectionPool` :func:`get` sends through (``pool``; None where the
    environment names a proxy or a transport is given), with the client's
    default headers and timeouts, and an ``httpx.Client`` for everything else
    (streamed downloads), made by ``make_client`` at its first use: a
    resolution that only reads pages and METADATA never imports httpx. Any
    attribute this class lacks is the httpx client's."""

    def __init__(self, *, pool: ConnectionPool | None,
                 headers: Mapping[str, str], timeout: Mapping[str, float | None],
                 make_client: Callable[[], httpx.Client]) -> None:
        self.pool = pool
        self.base_headers = tuple(headers.items())
        self.timeouts = dict(timeout)
        self._make_client = make_client
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        if pool is None:
            self._client = make_client()

    def httpx_client(self) -> httpx.Client:
        """The httpx client, made now if this is its first use."""
        with self._client_lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not made yet, or not this class's
            raise AttributeError(name)
        return getattr(self.httpx_client(), name)

    def __enter__(self) -> PooledClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self.pool is not None:
            self.pool.close()


class Headers(Mapping[str, str]):
    """Response headers: names case-insensitive, a repeated one's values
    joined by ", " (as httpx joins them)."""

    def __init__(self, lines: Iterable[tuple[str, str]]) -> None:
        found: dict[str, str] = {}
        for name, value in lines:
            key = name.lower()
            found[key] = f"{found[key]}, {value}" if key in found else value
        self._found = found

    def __getitem__(self, name: str) -> str:
        return self._found[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found)

    def __len__(self) -> int:
        return len(self._found)

    def __repr__(self) -> str:
        return f"Headers({self._found!r})"


@dataclass(frozen=True, kw_only=True)
class Reply:
    """A complete answer: the final ``url`` (after redirects), the ones passed
    on the way (``history``), and the body as sent over the wire (``wire_bytes``,
    before any decoding). ``content`` is empty when ``read_body`` declined it."""

    url: str
    status_code: int
    headers: Headers
    content: bytes
    history: tuple[str, ...] = ()
    wire_bytes: int = 0

    def raise_for_status(self) -> None:
        """httpx's HTTPStatusError for a 4xx or 5xx answer."""
        if self.status_code < 400:
            return
        request = httpx.Request("GET", self.url)
        response = httpx.Response(self.status_code, headers=dict(self.headers),
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
    if not isinstance(http, PooledClient):
        return _via_client(http, url, headers or {}, basic, read_body)
    if http.pool is None:
        return _via_client(http.httpx_client(), url, headers or {}, basic, read_body)
    if basic is None and read_body is None and _early:
        early = _take_early(url, headers or {})
        if early is not None:
            return early
    return _via_pool(http.pool, url, headers or {}, basic, read_body,
                     base=http.base_headers, timeout=http.timeouts)


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
                with ConnectionPool(context()) as pool:
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
                     headers=Headers(response.headers.multi_items()), content=body,
                     history=tuple(str(r.url) for r in response.history),
                     wire_bytes=response.num_bytes_downloaded)


def _via_pool(pool: ConnectionPool, url: str,
              headers: Mapping[str, str], basic: tuple[str, str] | None,
              read_body: Callable[[int], bool] | None, *,
              base: Iterable[tuple[str, str]], timeout: Mapping[str, float | None]
              ) -> Reply:
    url, basic = _split_userinfo(url, basic)
    own = {k.lower(): v for k, v in headers.items()}
    own.setdefault("accept-encoding", "gzip, deflate")
    skipped = {*own, "accept-encoding", "connection"}
    sent = [(k, v) for k, v in base if k.lower() not in skipped]
    sent += list(own.items())
    auth = None if basic is None else (
        "Authorization",
        "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode())
    history: list[str] = []
    origin = _origin(url)
    location: str | None = None

    def wanted(status: int, lines: list[tuple[str, str]]) -> bool:
        nonlocal location
        location = next((v for k, v in lines if k.lower() == "location"), None)
        if status in _REDIRECTS and location:
            return False
        return read_body is None or read_body(status)

    while True:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request_headers = sent + ([auth] if auth and _origin(url) == origin else [])
        try:
            port = parts.port
        except ValueError as exc:
            raise httpx.InvalidURL(str(exc)) from None
        answer = pool.get(parts.scheme, parts.hostname or "", port, target,
                          request_headers, timeout=timeout, wanted=wanted)
        status = answer.status
        if status in _REDIRECTS and location:
            if len(history) >= MAX_REDIRECTS:
                raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.")
            history.append(url)
            url = urljoin(url, location)
            continue
        found = Headers(answer.headers)
        return Reply(url=url, status_code=status, headers=found,
                     content=_decode(answer.body, found.get("content-encoding", "")),
                     history=tuple(history), wire_bytes=len(answer.body))


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
