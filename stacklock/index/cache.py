"""The on-disk page cache, ``<cache>/pages/``. Files only: the client decides what
to fetch, the parsers what a body means.

``<sha256 of the URL>.page`` is a JSON header line (content type, ETag,
Last-Modified, redirect target, length and sha256 of the body, and until when the
page is fresh) and the body as fetched. A page is fresh for the ``max-age`` its
response gave (PyPI: 600 s for simple pages), counted from when it was fetched;
one whose response says nothing about caching gets the same 600 s, RFC 9111's
heuristic freshness; ``no-cache``, ``no-store`` or ``max-age=0`` make it stale at
once. Within its freshness a page is used without asking the index again.

Beside it, ``<key>.rows`` holds the page's rows (or PEP 691 file entries;
none for a PEP 691 page large enough to be scanned, :mod:`stacklock.index.json_scan`)
as a marshal blob, keyed by the body's sha256, the URL its links resolve against,
the content type and :data:`ROWS_FORMAT`: a warm run reads the header line and
the blob, and neither reads nor parses a body; a stale page fetched again with
the same body finds its blob too. Entries are written without fsync (a cache,
not a record): every reader checks what it reads (the body's length and sha256,
the blob's format) and refetches after a crash that tore one. Credentials never
reach these files: page keys use the URL without them, and a page whose links
would carry them (relative hrefs under a URL with user info) gets no blob.

The folder is flat, as are ``metadata/`` and ``native/``: with two-hex-digit
subfolders a cold resolution made a folder for nearly every entry (~320 for
sglang), and a new folder costs the kernel about twice what the file in it does
(100 small entries: 18-23 ms of CPU in new subfolders, 6-7 ms in one folder).
ext4 indexes the names in a folder, so one large folder is no slower to search.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from stacklock._fs import atomic_write_bytes, atomic_write_chunks
from stacklock.bounded import parse_json
from stacklock.index.pages import PageRows
from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["DEFAULT_MAX_AGE", "ROWS_FORMAT", "PageCache", "freshness",
           "is_fresh_header"]

# Bump when the rows a parser gives change: blobs of another format are ignored.
ROWS_FORMAT = 2
# seconds a page is fresh when its response says nothing (PyPI's max-age)
DEFAULT_MAX_AGE = 600.0
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)", re.IGNORECASE)
_NO_CACHE = re.compile(r"(?:^|,)\s*no-(?:cache|store)\b", re.IGNORECASE)


def freshness(cache_control: str | None, age: str | None) -> float:
    """Seconds a response stays fresh from when it arrived (RFC 9111: max-age
    less the Age it already had; no-cache/no-store: none)."""
    if cache_control:
        if _NO_CACHE.search(cache_control):
            return 0.0
        found = _MAX_AGE.search(cache_control)
        if found:
            already = float(age) if age and age.strip().isdigit() else 0.0
            return max(0.0, float(found.group(1)) - already)
    return DEFAULT_MAX_AGE


def _media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


class PageCache:
    """Pages and their rows under ``root`` (``<cache>/pages``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def page_path(self, url: str) -> Path:
        key = hashlib.sha256(strip_credentials(url).encode()).hexdigest()
        return self.root / f"{key}.page"

    def read_page(self, url: str) -> tuple[bytes, str, dict[str, Any]] | None:
        """(body, content type, header) of a complete cached page, else None."""
        path = self.page_path(url)
        if not path.is_file():
            return None
        try:
            raw = path.read_bytes()
            header, _, body = raw.partition(b"\n")
            meta = parse_json(header)
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("length") != len(body):
            return None
        digest = meta.get("sha256")
        if isinstance(digest, str) and hashlib.sha256(body).hexdigest() != digest:
            return None  # written without fsync and torn by a crash: fetch again
        return body, str(meta.get("content-type", "")), meta

    def write_page(self, url: str, page_url: str, body: bytes,
                   meta: dict[str, Any]) -> None:
        # Only a redirect target is stored (without credentials); otherwise the
        # page URL is the one asked for, credentials and all, kept in memory.
        moved = strip_credentials(page_url) if page_url != url else None
        record = {**meta, "redirected-to": moved, "length": len(body)}
        header = json.dumps(record, sort_keys=True).encode()
        atomic_write_chunks(self.page_path(url), (header + b"\n", body),
                            durable=False)

    def rows_path(self, base: str, content_type: str, body_sha256: str
                  ) -> Path | None:
        """Where the rows of a body live; None when the URL its links resolve
        against has credentials (rows hold absolute URLs)."""
        if "@" in urlsplit(base).netloc:
            return None
        text = f"{ROWS_FORMAT}\n{_media_type(content_type)}\n{base}\n{body_sha256}"
        key = hashlib.sha256(text.encode()).hexdigest()
        return self.root / f"{key}.rows"

    def header(self, url: str) -> dict[str, Any] | None:
        """The header line of the cached page of ``url`` (the body unread)."""
        try:
            with self.page_path(url).open("rb") as fh:
                meta = parse_json(fh.readline(1 << 16))
        except (OSError, ValueError):
            return None
        return meta if isinstance(meta, dict) else None

    def is_fresh(self, url: str, now: float) -> bool:
        """Whether the cached page of ``url`` is still fresh at ``now``."""
        meta = self.header(url)
        return meta is not None and is_fresh_header(meta, now)

    def cached_rows(self, url: str, *, now: float | None
                    ) -> tuple[PageRows, str] | None:
        """The rows of the cached page of ``url`` and the body's sha256, found
        through the page's header line alone; None if the page, its sha256 or
        the blob is missing, or if the page is no longer fresh at ``now`` (None:
        any age will do)."""
        meta = self.header(url)
        if meta is None or not isinstance(meta.get("sha256"), str):
            return None
        if now is not None and not is_fresh_header(meta, now):
            return None
        rows = read_rows(self.rows_path(meta.get("redirected-to") or url,
                                        str(meta.get("content-type", "")),
                                        meta["sha256"]))
        return None if rows is None else (rows, meta["sha256"])

    @staticmethod
    def write_rows(path: Path, page: PageRows) -> None:
        if page.files is not None and not isinstance(page.files, list):
            return  # a scanned page: scanning its body again beats reading a blob
        try:
            data = marshal.dumps(
                (ROWS_FORMAT, page.anchors, page.rows, page.files, page.base_url))
        except ValueError:  # JSON nested past marshal's depth: not cached
            return
        atomic_write_bytes(path, data, durable=False)


def is_fresh_header(meta: dict[str, Any], now: float) -> bool:
    """Whether a page whose header line is ``meta`` is still fresh at ``now``."""
    until = meta.get("fresh-until")
    return isinstance(until, (int, float)) and now < until


def read_rows(path: Path | None) -> PageRows | None:
    """A rows blob, or None when absent, unreadable or of another format."""
    if path is None:
        return None
    try:
        version, anchors, rows, files, base = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if version != ROWS_FORMAT:
        return None
    return PageRows(rows=rows, files=files, base_url=base, anchors=anchors)
