"""An archive of the files locks install, and reading a file back from one.

``stacklock archive LOCK DEST`` writes it (:mod:`stacklock.archive`); install,
pack and bisect read from it through the artifact store
(:class:`stacklock.store.ArtifactStore`) when a locked file's own URL is gone.
The layout, in a folder, an S3 prefix or behind any static HTTP server::

    files/<sha256>/<filename>        each file under the sha256 of its bytes
    simple/index.html                PEP 503: one link per project
    simple/<project>/index.html      the project's files, each linked as
                                     ../../files/<sha256>/<filename>#sha256=<sha256>

so ``uv pip install --index-url URL/simple`` (or pip) can use it as an index.
A file read back counts only if its bytes hash to the lock's sha256: an archive
is trusted no more than the original index.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

from stacklock.errors import DownloadError, StacklockError
from stacklock.objectstore import is_http, open_object_store
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    import httpx

__all__ = ["ARCHIVE_ENV", "ARCHIVE_FIRST_ENV", "GONE_STATUS", "Archive",
           "archive_url_problem", "fetch_from_archive", "file_key", "filename_of",
           "gone_reason"]

ARCHIVE_ENV = "STACKLOCK_ARCHIVE"
ARCHIVE_FIRST_ENV = "STACKLOCK_ARCHIVE_FIRST"
# what an original URL answers when its file is gone: 404 and 410, and 403, which
# S3 (download.pytorch.org's pruned nightlies) answers for a key it will not show
GONE_STATUS = frozenset({403, 404, 410})


@dataclass(frozen=True, kw_only=True)
class Archive:
    """Where a lock's files were archived; ``first``: ask it before the
    original URLs (a fast internal mirror), not only when those are gone."""

    url: str
    first: bool = False

    @classmethod
    def from_options(cls, url: str | None, *, first: bool = False,
                     environ: Mapping[str, str] = os.environ,
                     recorded: Archive | None = None) -> Archive | None:
        """``--archive URL`` / ``--archive-first``, else ``STACKLOCK_ARCHIVE`` /
        ``STACKLOCK_ARCHIVE_FIRST=1``, else the archive the lock ``recorded``
        (its profile's ``[archive]``; the flag or variable still turns
        ``first`` on); None when none names one."""
        url = url or environ.get(ARCHIVE_ENV) or None
        first = first or environ.get(ARCHIVE_FIRST_ENV, "") not in ("", "0")
        if url is None and recorded is not None:
            return cls(url=recorded.url, first=recorded.first or first)
        if url is None:
            if first:
                raise StacklockError("--archive-first needs an archive",
                                     hint=f"--archive URL or {ARCHIVE_ENV}=URL")
            return None
        if not is_http(url):
            open_object_store(url)  # a scheme it cannot read fails now, one line
        return cls(url=url.rstrip("/"), first=first)

    @property
    def shown(self) -> str:
        return redact_url(self.url)


def archive_url_problem(url: str) -> str | None:
    """What keeps ``url`` from being an archive a profile or a lock records,
    None when nothing does: it names the same place on every machine (an
    absolute folder, ``file://``, ``s3://BUCKET``, ``http(s)://HOST``) and
    holds no credentials (those come from the environment, ``~/.aws`` or
    ``~/.netrc``; a lock is reviewed and shared)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if "@" in parts.netloc:
        return ("credentials in the URL: a profile and its lock are shared; "
                "give them in the environment (AWS_*, ~/.aws, ~/.netrc)")
    if scheme in ("http", "https", "s3") and not parts.netloc:
        return f"no {'bucket' if scheme == 's3' else 'host'} in the URL"
    if scheme == "file" or scheme in ("http", "https", "s3"):
        return None
    if scheme:
        return f"unknown scheme {scheme}://"
    if not url.startswith("/"):
        return "a relative folder is another folder on each machine"
    return None


def file_key(sha256: str, filename: str) -> str:
    """Where a file lives in an archive (relative, unquoted)."""
    return f"files/{sha256}/{filename}"


def filename_of(url: str) -> str:
    """The file name a URL ends with (``%2B`` read as ``+``)."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def gone_reason(exc: BaseException) -> str | None:
    """Why a download's failure means the file is gone from its URL (HTTP 403,
    404, 410; a host name no one knows any more), or None: any other failure,
    which the caller reports as it is."""
    if isinstance(exc, DownloadError) and exc.status in GONE_STATUS:
        if isinstance(exc.__cause__, FileNotFoundError):
            return "no such file"  # a file:// URL (a folder index)
        return f"HTTP {exc.status}"
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        cause = cause.__cause__ or cause.__context__
    return None


def fetch_from_archive(
    archive: Archive,
    http: httpx.Client,
    *,
    sha256: str,
    filename: str,
    part: Path,
    size: int | None,
    progress: Callable[[int, int | None], None] | None,
) -> tuple[str, str] | None:
    """Fill ``part`` with the archive's copy of the file: ``(its sha256, where
    it came from)``, or None when the archive has none. The caller compares the
    sha256 with the lock's."""
    key = file_key(sha256, filename)
    if is_http(archive.url):
        from stacklock.download import download

        url = f"{archive.url}/{quote(key)}"
        try:
            got = download(http, url, part, size=size, progress=progress)
        except DownloadError as exc:
            if exc.status in (403, 404, 410):
                return None
            raise
        return got, redact_url(url)
    from stacklock._fs import file_digest

    store = open_object_store(archive.url)
    part.unlink(missing_ok=True)
    if not store.get(key, part):
        return None
    if progress is not None:
        done = part.stat().st_size
        progress(done, done)
    return file_digest(part), f"{archive.shown}/{key}"
