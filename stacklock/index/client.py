"""Reading index pages over HTTP and from local folders. I/O only: the parsers in
:mod:`stacklock.index.pages` interpret the bytes.

One ``httpx.Client`` is passed in (one connection pool for the whole run). Pages are
fetched with PEP 691 content negotiation (JSON preferred, HTML accepted), redirects
followed, transient failures (timeouts, connection resets, 5xx, 429, truncated bodies)
retried a few times with a short backoff, and every URL that reaches an error or a
log is redacted. Good pages are cached on disk under ``<cache>/pages/``; a failed or
partial response is never cached.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from packaging.utils import canonicalize_name

from stacklock.errors import IndexUnreadable
from stacklock.http import (
    Credentials,
    DeadlineExceeded,
    Limits,
    RetriesExhausted,
    Retry,
    get,
    is_network_failure,
)
from stacklock.index.cache import PageCache, freshness, read_rows
from stacklock.index.links import project_of
from stacklock.index.local import is_local, load_local_rows, local_project_names
from stacklock.index.names import parse_project_names
from stacklock.index.pages import (
    Link,
    PageRows,
    ParsedPage,
    only_project_rows,
    rows_from_html,
    rows_from_json,
)
from stacklock.urls import redact_text, redact_url, strip_credentials
from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from stacklock.profile import IndexSpec

__all__ = ["ACCEPT", "IndexClient"]

log = logging.getLogger("stacklock.index")

ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)
_JSON_TYPES = ("application/vnd.pypi.simple.v1+json", "application/json")
_HTML_TYPES = ("text/html", "application/vnd.pypi.simple.v1+html",
               "application/xhtml+xml")
# index pages: a little more patience per attempt, two minutes at most in all
PAGE_RETRY = Retry(backoff=0.5, total=120.0)
HINT = ("point the index at a mirror with --index NAME=URL, or use the page cache "
        "with --offline")


# (index URL, project) -> its lock, process-wide (see IndexClient._memo)
_PAGE_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_PAGE_LOCKS_GUARD = threading.Lock()


class IndexClient:
    """Fetches and caches project pages; see the module docstring.

    ``retry`` carries the sleep and clock that retry tests replace; ``clock``
    (epoch seconds) says when a cached page stops being fresh (see
    :mod:`stacklock.index.cache`). Each index the client reads is registered
    with the client's :class:`~stacklock.http.Credentials`, so its credentials
    go with every request to its origin (pages, METADATA, downloads).
    """

    def __init__(
        self,
        http: httpx.Client,
        *,
        cache_dir: Path | None = None,
        offline: bool = False,
        refresh: bool = False,
        retry: Retry = PAGE_RETRY,
        max_workers: int = 8,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.http = http
        self.clock = clock
        self.cache_dir = Path(cache_dir) / "pages" if cache_dir is not None else None
        self._cache = PageCache(self.cache_dir) if self.cache_dir is not None else None
        self.offline = offline
        self.refresh = refresh
        self.retry = retry
        self.max_workers = max_workers
        self.requests = 0  # HTTP requests sent, retries included (for tests/benches)
        # URL (no credentials) -> sha256 of the page body read; None: no page
        # (not on the index); what a replay of the resolution checks
        self.pages_read: dict[str, str | None] = {}
        self._pages: dict[tuple[str, str], PageRows | IndexUnreadable] = {}
        self._parsed: dict[tuple[str, str], ParsedPage] = {}
        # index URL -> the error of a page it did not answer for: its other
        # pages fail at once (one page lost ends the run), not a deadline each
        self._silent: dict[str, IndexUnreadable] = {}
        self._lock = threading.Lock()

    # -- public -------------------------------------------------------------------

    def get_links(self, index: IndexSpec, project: str) -> list[Link]:
        """Every wheel/sdist ``index`` offers for ``project``; [] when the index
        does not have it (HTTP 404). Raises IndexUnreadable when it cannot be read."""
        return list(self.get_page(index, project).links)

    def get_page(self, index: IndexSpec, project: str) -> ParsedPage:
        """Like :meth:`get_links`, with the skipped entries and their reasons."""
        key = (index.url, canonicalize_name(project))
        page = self._parsed.get(key)
        if page is None:
            page = self._parsed[key] = self.get_rows(index, project).to_page()
        return page

    def get_rows(self, index: IndexSpec, project: str) -> PageRows:
        """The page as rows, no file name judged yet: what the finder scans."""
        name = canonicalize_name(project)
        return self._memo((index.url, name), lambda: self._load(index, name))

    def is_local(self, index: IndexSpec, project: str) -> bool:
        """Whether the page can be had without a request: read already, a local
        index, or fresh in the cache (with --offline: in the cache at all)."""
        name = canonicalize_name(project)
        if (index.url, name) in self._pages or is_local(index.url):
            return True
        flat = index.kind == "flat"
        if flat and (index.url, "") in self._pages:
            return True
        if self._cache is None or self.refresh:
            return False
        url = index.url if flat else self.project_url(index, name)
        if self.offline:
            return self._cache.header(url) is not None
        return self._cache.is_fresh(url, self.clock())

    def has_links(self, index: IndexSpec, project: str) -> bool:
        """Whether ``index`` offers any wheel or sdist of ``project``."""
        return self.get_rows(index, project).has_links()

    def _memo(self, key: tuple[str, str],
              load: Callable[[], PageRows]) -> PageRows:
        """Load each page once, also when several threads ask at the same time;
        an error is remembered and raised again. The lock per page is
        process-wide: a client asking for a page another client is loading
        waits, then finds it in the cache."""
        with _PAGE_LOCKS_GUARD:
            key_lock = _PAGE_LOCKS.setdefault(key, threading.Lock())
        with key_lock:
            found = self._pages.get(key)
            if found is None:
                try:
                    found = load()
                except IndexUnreadable as exc:
                    found = exc
                self._pages[key] = found
        if isinstance(found, IndexUnreadable):
            raise found
        return found

    def prefetch(
        self, index_project_pairs: Iterable[tuple[IndexSpec, str]]
    ) -> None:
        """Fetch many pages at once over the shared client; errors are kept and
        raised by the later :meth:`get_links` for that page."""
        pairs = list(index_project_pairs)
        if not pairs:
            return

        def one(pair: tuple[IndexSpec, str]) -> None:
            try:
                self.get_rows(*pair)
            except IndexUnreadable:
                pass  # stored; re-raised where the page is used

        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(pairs))) as ex:
            list(ex.map(one, pairs))

    def find_unreachable(self, probes: Iterable[tuple[IndexSpec, str]]
                         ) -> list[IndexUnreadable]:
        """The indexes of ``probes`` (an index, a project to ask it for) that do
        not answer, each once, in order: asked all at once, so that naming every
        dead index costs one request deadline; pages read before are not asked
        again."""
        pairs = list(probes)
        self.prefetch(pairs)
        dead: dict[str, IndexUnreadable] = {}
        for index, project in pairs:
            try:
                self.get_rows(index, project)
            except IndexUnreadable as exc:
                if exc.network:
                    dead.setdefault(index.name, exc)
        return list(dead.values())

    def project_names(self, index: IndexSpec) -> list[str]:
        """The projects ``index`` lists (its root page, a flat page's or a
        folder's files), for "did you mean"; [] when it cannot say (offline
        with nothing cached, unreachable, refused): it is asked only on the way
        to an error, which stays the same."""
        try:
            if is_local(index.url):
                return local_project_names(index)
            if index.kind == "flat":
                page = self._memo((index.url, ""),
                                  lambda: self._fetch(index, index.url, flat=True))
                return sorted({n for f in page.filenames()
                               if f and (n := project_of(f))})
            return self._root_names(index)
        except (IndexUnreadable, OSError):
            return []

    def _root_names(self, index: IndexSpec) -> list[str]:
        """The root page's names, from the cache while fresh (as any page)."""
        url = f"{index.url.rstrip('/')}/"
        now = self.clock()
        cached = self._cache.read_page(url) if self._cache is not None else None
        if cached is not None and (self.offline or now < cached[2].get(
                "fresh-until", 0)):
            return parse_project_names(cached[0], cached[1])
        if self.offline:
            return []
        response = self._request(index, url, {"Accept": ACCEPT})
        if response.status_code >= 400:
            return []
        body, ctype = response.content, response.headers.get("content-type", "")
        if self._cache is not None:
            self._cache.write_page(url, url, body, {
                "content-type": ctype, "sha256": hashlib.sha256(body).hexdigest(),
                "fresh-until": now + freshness(response.headers.get("cache-control"),
                                               response.headers.get("age"))})
        return parse_project_names(body, ctype)

    def project_url(self, index: IndexSpec, project: str) -> str:
        if index.kind == "flat":
            return index.url
        return f"{index.url.rstrip('/')}/{canonicalize_name(project)}/"

    # -- loading ------------------------------------------------------------------

    def _load(self, index: IndexSpec, project: str) -> PageRows:
        if is_local(index.url):
            return load_local_rows(index, project)
        if index.kind == "flat":
            page = self._memo((index.url, ""),
                              lambda: self._fetch(index, index.url, flat=True))
            return only_project_rows(page, project)
        return self._fetch(index, self.project_url(index, project), flat=False)

    def _fetch(self, index: IndexSpec, url: str, *, flat: bool) -> PageRows:
        cache = self._cache
        now = self.clock()
        if cache is not None and not self.refresh:
            # a warm run: no body read, no parsing, no request while fresh
            found = cache.cached_rows(url, now=None if self.offline else now)
            if found is not None:
                self._note(url, found[1])
                return found[0]
        cached = cache.read_page(url) if cache is not None else None
        self._note(url, None)  # until a page is had: a miss is not replayable
        if self.offline:
            if cached is None:
                raise IndexUnreadable(
                    "page is not in the cache and --offline is set",
                    index=index.name, url=redact_url(url),
                    hint="run once online (without --offline) to fill the cache")
            return self._parse_cached(index, url, cached, flat=flat)
        if cached is not None and not self.refresh and now < cached[2].get(
                "fresh-until", 0):
            return self._parse_cached(index, url, cached, flat=flat)
        headers = {"Accept": ACCEPT}
        if cached is not None:
            if cached[2].get("etag"):
                headers["If-None-Match"] = cached[2]["etag"]
            if cached[2].get("last-modified"):
                headers["If-Modified-Since"] = cached[2]["last-modified"]
        response = self._request(index, url, headers)
        fresh_until = now + freshness(response.headers.get("cache-control"),
                                      response.headers.get("age"))
        if response.status_code == 304 and cached is not None:
            body, ctype, meta = cached
            meta = {**meta, "fresh-until": fresh_until}
            if cache is not None:  # fresh again: the header line says until when
                cache.write_page(url, meta.get("redirected-to") or url, body, meta)
            return self._parse_cached(index, url, (body, ctype, meta), flat=flat)
        if response.status_code in (404, 410):
            log.debug("%s: %s not on index %s", response.status_code,
                      redact_url(url), index.name)
            return PageRows()
        if response.status_code >= 400:
            message, hint = _refusal(response.status_code)
            raise IndexUnreadable(message, index=index.name, url=redact_url(url),
                              hint=hint)
        body = response.content
        meta = {
            "content-type": response.headers.get("content-type", ""),
            "sha256": hashlib.sha256(body).hexdigest(),
            "etag": response.headers.get("etag"),
            "last-modified": response.headers.get("last-modified"),
            "fresh-until": fresh_until,
        }
        # after a redirect, relative hrefs resolve against the final URL
        page_url = str(response.url) if response.history else url
        if page_url != url:
            meta["redirected-to"] = page_url
        page = self._parse(index, url, body, meta["content-type"], meta, flat=flat)
        if cache is not None:
            cache.write_page(url, page_url, body, meta)
            self._note(url, meta["sha256"])
        return page

    def _parse_cached(self, index: IndexSpec, url: str,
                      cached: tuple[bytes, str, dict[str, Any]], *, flat: bool
                      ) -> PageRows:
        page = self._parse(index, url, *cached, flat=flat)
        self._note(url, cached[2].get("sha256"))
        return page

    def _note(self, url: str, sha256: str | None) -> None:
        """Remember which page body a remote page was (None: none was had)."""
        with self._lock:
            self.pages_read[strip_credentials(url)] = sha256

    def _parse(self, index: IndexSpec, url: str, body: bytes, content_type: str,
               meta: dict[str, Any], *, flat: bool) -> PageRows:
        """Pick the parser by content type (sniffing when the type says nothing);
        raise IndexUnreadable for anything that is not an index page. The rows of a
        good page are cached beside it, so a warm run parses no JSON or HTML."""
        base = meta.get("redirected-to") or url
        ctype = content_type.split(";")[0].strip().lower()
        blob = None if self._cache is None else self._cache.rows_path(
            base, ctype, meta.get("sha256") or hashlib.sha256(body).hexdigest())
        page = read_rows(blob)
        if page is not None:
            return page
        head = body.lstrip()[:1]
        if ctype in _JSON_TYPES or (ctype not in _HTML_TYPES and head == b"{"):
            page = rows_from_json(body, base)
        elif ctype in _HTML_TYPES or head == b"<":
            page = rows_from_html(body, base)
            if ctype not in _HTML_TYPES and page.anchors == 0:
                page = PageRows(problem=f"content type {ctype or 'none'!r} and no "
                                        "links: not an index page")
        else:
            page = PageRows(problem=f"content type {ctype or 'none'!r} is neither "
                                    "PEP 691 JSON nor HTML: not an index page")
        if page.problem:
            raise IndexUnreadable(page.problem, index=index.name, url=redact_url(url),
                              hint="check that the URL is a simple index root "
                                   "(PEP 503/691), or a find-links page")
        if blob is not None:
            PageCache.write_rows(blob, page)
        return page

    # -- HTTP -----------------------------------------------------------------------

    def _request(self, index: IndexSpec, url: str,
                 headers: dict[str, str]) -> httpx.Response:
        """GET with the retry policy; returns a complete answer whose status is
        final (not one worth asking again for). Every attempt, and the waits in
        between, end within the request deadline (``--timeout``): an index
        that never answers is reported then, not after three full attempts."""
        shown = redact_url(url)
        with self._lock:
            silent = self._silent.get(index.url)
        if silent is not None:
            raise silent
        try:
            return self._attempts(index, url, headers, shown)
        except IndexUnreadable as exc:
            if exc.network:
                with self._lock:
                    self._silent.setdefault(index.url, exc)
            raise

    def _attempts(self, index: IndexSpec, url: str, headers: dict[str, str],
                  shown: str) -> httpx.Response:
        auth = self.http.auth
        if isinstance(auth, Credentials):
            auth.add_index(index.name, index.url)
        limits = Limits.from_env()
        retry = dataclasses.replace(self.retry, total=min(
            self.retry.total or limits.deadline, limits.deadline))
        ends = retry.clock() + limits.deadline

        def attempt(n: int) -> httpx.Response:
            with self._lock:
                self.requests += 1
            log.debug("GET %s (attempt %d)", shown, n)
            left = ends - retry.clock()
            if left <= 0:
                raise DeadlineExceeded(
                    f"gave up within the {limits.deadline:g} s allowed (--timeout "
                    "or STACKLOCK_HTTP_TIMEOUT raises it)")
            return get(self.http, url, headers=headers,
                       limits=Limits(max_bytes=limits.max_bytes, deadline=left))

        try:
            return retry.call(attempt)
        except httpx.TooManyRedirects:
            raise IndexUnreadable(
                "redirect loop: the server sends the page round in a circle",
                index=index.name, url=shown,
                hint="check the index URL (with or without a trailing "
                     "slash), or point the index at a mirror with "
                     "--index NAME=URL") from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            message = redact_text(str(exc), url=url)
            raise IndexUnreadable(f"unsupported URL: {message}",
                              index=index.name, url=shown,
                              hint="use an https://, file:// URL or a folder"
                              ) from None
        except RetriesExhausted as exc:
            raise IndexUnreadable(
                f"unreachable after {counted(exc.attempts, 'attempt')}: "
                f"{redact_text(exc.problem, url=url)}",
                index=index.name, url=shown, hint=HINT, network=True) from None
        except httpx.HTTPError as exc:  # a cap or deadline met: not retried
            raise IndexUnreadable(f"{type(exc).__name__}: "
                              f"{redact_text(str(exc), url=url)}",
                              index=index.name, url=shown, hint=HINT,
                              network=is_network_failure(exc)) from None


def _refusal(status: int) -> tuple[str, str]:
    """Message and hint for a page the index will not serve. A 403 is what
    S3-backed indexes (download.pytorch.org) answer for a project they do not
    have, so it says so rather than blaming credentials; a 401 asks for them."""
    if status == 401:
        return ("HTTP 401: the index wants credentials",
                "put them in the URL (user:password@), in "
                "STACKLOCK_INDEX_<NAME>_USERNAME and _PASSWORD, or in ~/.netrc")
    if status == 403:
        return ("HTTP 403: the index refuses this page (download.pytorch.org "
                "answers 403 for a project it does not have)",
                "check the project name, or pin the project to an index that "
                "has it ([[index]] packages)")
    return f"HTTP {status}", HINT
