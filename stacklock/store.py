"""Content-addressed artifact store: every downloaded file lives under its sha256.

Layout under ``root`` (normally ``<cache>/artifacts``)::

    sha256/ab/<hex>        the files, named by the sha256 of their bytes
    sha256/ab/<hex>.ok     "<size> <mtime_ns> <inode>" of the file when its bytes
                           were last hashed: a file whose stat differs is hashed
                           again before it is handed out, and dropped on a mismatch
    urls/ab/<key>          per URL: "<sha256>\\n<url without credentials>\\n"
    tmp/<key>.part         a download in progress, kept so it can resume
    tmp/<key>.lock         held (flock) while a process downloads that URL

The URL index has one file per URL rather than one shared file so that concurrent
processes never read-modify-write the same file; every write is an atomic rename.
Resolve uses the store to hash wheels whose index gave no (or several) hashes;
install feeds uv from it and downloads the CUDA runfile through it, resumably.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from stacklock._fs import atomic_write_text, file_digest
from stacklock.errors import HashMismatchError
from stacklock.urls import redact_url, strip_credentials

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import httpx

    from stacklock.http import Retry
    from stacklock.lockarchive import Archive

__all__ = ["ArtifactStore"]

_CHUNK = 1 << 20
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _url_key(url: str) -> str:
    return hashlib.sha256(strip_credentials(url).encode("utf-8")).hexdigest()


class ArtifactStore:
    """Files keyed by sha256, plus which URL gave which sha256. With an
    ``archive`` (:mod:`stacklock.lockarchive`), a file of known sha256 whose
    URL is gone (HTTP 403/404/410, unknown host) is fetched from the archive
    instead (from there first with ``archive.first``); ``from_archive`` lists
    ``(filename, why)`` for each one that came from there."""

    def __init__(self, root: Path, *, retry: Retry | None = None,
                 archive: Archive | None = None) -> None:
        self.root = Path(root)
        self.retry = retry
        self.archive = archive
        self.from_archive: list[tuple[str, str]] = []
        self.bytes_fetched = 0  # received over the network by this store's fetches
        self._unknown_hosts: set[str] = set()  # asked once a run, then skipped

    def _blob(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256

    def path_for(self, sha256: str) -> Path | None:
        """The stored file with this sha256, or None. A file changed since its
        bytes were last hashed (a flipped byte, a truncation) is hashed again;
        one whose bytes no longer match is removed, so it is fetched again."""
        sha256 = sha256.lower()
        if not _HEX64.match(sha256):
            return None
        path = self._blob(sha256)
        try:
            stat = path.stat()
        except OSError:
            return None
        seal = path.with_name(f"{sha256}.ok")
        with contextlib.suppress(OSError):
            if seal.read_text("ascii") == _signature(stat):
                return path
        if file_digest(path) != sha256:
            path.unlink(missing_ok=True)
            seal.unlink(missing_ok=True)
            return None
        _seal(path)
        return path

    def has(self, sha256: str) -> bool:
        return self.path_for(sha256) is not None

    def adopt(self, path: Path, sha256: str) -> Path:
        """Move a file whose sha256 the caller has checked into the store (a rename:
        ``path`` must be on the store's file system)."""
        blob = self._blob(sha256.lower())
        blob.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, blob)
        _seal(blob)
        return blob

    def sha256_for_url(self, url: str) -> str | None:
        """The sha256 of what ``url`` gave last time, when that file is still here."""
        key = _url_key(url)
        try:
            text = (self.root / "urls" / key[:2] / key).read_text("utf-8")
        except OSError:
            return None
        sha = text.split("\n", 1)[0].strip()
        return sha if self.has(sha) else None

    def fetch(
        self,
        http: httpx.Client,
        url: str,
        *,
        expected_sha256: str | None = None,
        size: int | None = None,
        progress: Callable[[int, int | None], None] | None = None,
        filename: str | None = None,
    ) -> tuple[Path, str]:
        """Download ``url`` once into the store and return ``(path, sha256)``.

        A known sha256 or a URL fetched before costs no network at all. Otherwise
        the body is streamed into ``tmp/`` while hashing; a cut connection is
        resumed with a Range request from the partial file (also across runs).
        A mismatch with ``expected_sha256`` deletes the bytes and raises
        :class:`HashMismatchError`, whichever source gave them. ``filename``
        names the file in an archive (default: the URL's last part).
        """
        expected = expected_sha256.lower() if expected_sha256 else None
        done = self._known(url, expected)
        if done is not None:
            return done
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        key = _url_key(url)
        with _locked(tmp / f"{key}.lock"):
            # Another process may have finished it while we waited for the lock.
            done = self._known(url, expected)
            if done is not None:
                return done
            part = tmp / f"{key}.part"
            # what an earlier run left to resume is not fetched by this one
            before = (part, part.stat().st_size if part.is_file() else 0)
            shown = redact_url(url)
            if self.archive is not None and expected is not None:
                part, sha, shown = self._with_archive(
                    http, url, part, expected=expected, size=size,
                    progress=progress, filename=filename)
            else:
                from stacklock.download import download  # the network, only here

                sha = download(http, url, part, size=size, progress=progress,
                               retry=self.retry)
            had = before[1] if part == before[0] else 0
            received = max(part.stat().st_size - had, 0)
            blob = self._keep(part, sha, expected=expected, shown=shown)
            self.bytes_fetched += received
            self._remember(url, sha)
            return blob, sha

    def fetch_archived(self, http: httpx.Client, *, sha256: str, filename: str,
                       size: int | None = None, why: str = "not beside the lock"
                       ) -> Path | None:
        """A file known by its sha256 alone (a lock's patch file, which has no
        URL) from the store, else from the archive into the store, checked
        against ``sha256``; None when neither has it."""
        done = self.path_for(sha256)
        if done is not None or self.archive is None:
            return done
        from stacklock.lockarchive import fetch_from_archive

        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        key = _url_key(f"{self.archive.url}/{sha256}")
        with _locked(tmp / f"{key}.lock"):
            part = tmp / f"{key}.part"
            got = fetch_from_archive(self.archive, http, sha256=sha256,
                                     filename=filename, part=part, size=size,
                                     progress=None)
            if got is None:
                return self.path_for(sha256)  # or another process stored it
            received = part.stat().st_size
            blob = self._keep(part, got[0], expected=sha256, shown=got[1])
            self.bytes_fetched += received
        self.from_archive.append((filename, why))
        return blob

    def _keep(self, part: Path, sha: str, *, expected: str | None,
              shown: str) -> Path:
        """Move a fetched file into the store under its sha256, unless it is
        not the ``expected`` one (then it is deleted)."""
        if expected is not None and sha != expected:
            part.unlink(missing_ok=True)
            raise HashMismatchError(url=shown, expected=expected, actual=sha)
        blob = self._blob(sha)
        blob.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, blob)
        _seal(blob)
        return blob

    def _with_archive(
        self,
        http: httpx.Client,
        url: str,
        part: Path,
        *,
        expected: str,
        size: int | None,
        progress: Callable[[int, int | None], None] | None,
        filename: str | None,
    ) -> tuple[Path, str, str]:
        """The file from its URL or from the archive: ``(partial file, its
        sha256, where it came from)``."""
        from stacklock.download import download
        from stacklock.errors import DownloadError
        from stacklock.lockarchive import fetch_from_archive, filename_of, gone_reason

        archive = self.archive
        assert archive is not None
        name = filename or filename_of(url)
        copy = part.with_name(f"{_url_key(archive.url + '/' + expected)}.part")

        def from_archive() -> tuple[str, str] | None:
            return fetch_from_archive(archive, http, sha256=expected, filename=name,
                                      part=copy, size=size, progress=progress)

        if archive.first:
            got = from_archive()
            if got is not None:
                self.from_archive.append((name, "archive first"))
                return copy, *got
        host = urlsplit(url).hostname or ""
        try:
            if host in self._unknown_hosts:
                raise DownloadError("unknown host", url=redact_url(url))
            sha = download(http, url, part, size=size, progress=progress,
                           retry=self.retry)
        except DownloadError as exc:
            why = gone_reason(exc) or ("unknown host" if host in self._unknown_hosts
                                       else None)
            if why == "unknown host":
                self._unknown_hosts.add(host)
            if why is None or archive.first:
                raise
            got = from_archive()
            if got is None:
                raise DownloadError(
                    f"{why}, and the archive {archive.shown} has no copy of "
                    f"{name} (sha256 {expected})", url=redact_url(url),
                    hint=f"stacklock archive LOCK {archive.shown} while the "
                         "file can still be fetched", status=exc.status) from exc
            self.from_archive.append((name, why))
            return copy, *got
        return part, sha, redact_url(url)

    def _known(self, url: str, expected: str | None) -> tuple[Path, str] | None:
        if expected is not None:
            path = self.path_for(expected)
            if path is not None:
                self._remember(url, expected)
                return path, expected
        sha = self.sha256_for_url(url)
        if sha is not None and (expected is None or sha == expected):
            return self._blob(sha), sha
        return None

    def _remember(self, url: str, sha256: str) -> None:
        key = _url_key(url)
        entry = self.root / "urls" / key[:2] / key
        text = f"{sha256}\n{strip_credentials(url)}\n"
        with contextlib.suppress(OSError):
            if entry.read_text("utf-8") == text:
                return
        atomic_write_text(entry, text)

def _signature(stat: os.stat_result) -> str:
    return f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ino}"


def _seal(blob: Path) -> None:
    """Record that ``blob``'s bytes were hashed as they are now (its stat)."""
    with contextlib.suppress(OSError):  # a read-only store still serves
        atomic_write_text(blob.with_name(f"{blob.name}.ok"), _signature(blob.stat()))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on ``path``: one downloader per URL across processes."""
    with path.open("a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
