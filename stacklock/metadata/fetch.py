"""A wheel's METADATA, read with as few network bytes as possible, and cached.

The resolver needs only ``Requires-Dist`` and ``Requires-Python`` of a candidate, not
the (up to 900 MB) wheel. :meth:`MetadataFetcher.get` tries, in order:

1. the on-disk cache (``<cache>/metadata``), keyed by the wheel's sha256 when the
   index gave one, else by its URL: a second run reads no network bytes;
2. a wheel already in the artifact store (``<cache>/artifacts``);
3. the PEP 658/714 ``<url>.metadata`` file, checked against its sha256;
4. HTTP range reads into the remote zip (:mod:`stacklock.metadata.remote_zip`): one
   suffix read of the tail, then only the ``*.dist-info/METADATA`` member;
5. a full download into the artifact store, only when the server ignores ``Range``.

Every result is checked against the wheel filename (name and version) before it is
cached, so nothing wrong or partial ever lands on disk.
"""

from __future__ import annotations

import hashlib
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from stacklock._fs import atomic_write_bytes
from stacklock.errors import MetadataError, StacklockError, ZipReadError
from stacklock.http import describe_http_error, get, is_network_failure
from stacklock.index.local import is_local, local_path
from stacklock.metadata import remote_zip
from stacklock.metadata.archive_errors import BROKEN_ARCHIVE
from stacklock.metadata.parse import WheelMetadata, cache_key, parse_metadata
from stacklock.metadata.ranges import RANGE_RETRY, RangeReader
from stacklock.store import ArtifactStore
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from stacklock.http import Retry
    from stacklock.index.pages import Link
    from stacklock.metadata.listings import Listings
    from stacklock.metadata.sdist import SdistReader

__all__ = [
    "MetadataFetcher",
]

_TAIL = 64 * 1024


# per wheel (cache key), process-wide: a second fetcher asking for a wheel
# another is reading waits, then finds it in the cache
_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()


class MetadataFetcher:
    """Reads wheel METADATA for the resolver; safe to call from many threads.

    ``cache_dir`` is the stacklock cache root (:func:`stacklock._fs.cache_dir`):
    entries go to ``cache_dir/metadata``, full downloads to ``cache_dir/artifacts``.
    ``bytes_read`` counts response-body bytes taken from the network.
    ``sdists`` answers for source distributions (None: they are refused).
    ``listings`` keeps each central directory a tail read held whole, for the
    native check (:mod:`stacklock.metadata.listings`).
    """

    def __init__(
        self,
        http: httpx.Client,
        *,
        cache_dir: Path,
        offline: bool = False,
        store: ArtifactStore | None = None,
        retry: Retry = RANGE_RETRY,
        sdists: SdistReader | None = None,
        listings: Listings | None = None,
    ) -> None:
        self._http = http
        self._retry = retry
        self._dir = Path(cache_dir) / "metadata"
        self._offline = offline
        self._store = store or ArtifactStore(Path(cache_dir) / "artifacts")
        self._lock = threading.Lock()
        self._memo: dict[str, WheelMetadata] = {}
        self._sdists = sdists
        self._listings = listings
        self.bytes_read = 0

    def get(self, link: Link) -> WheelMetadata:
        """The METADATA of the wheel ``link`` points to (see the module docstring),
        or of the wheel the sdist ``link`` points to will build."""
        key = self._key(link)
        memo = f"{key} {link.filename}"
        with _KEY_LOCKS_GUARD:
            key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
        # one fetch per wheel, however many threads (or fetchers) ask
        with key_lock:
            meta = self._memo.get(memo) or self._from_cache(key, link)
            if meta is None:
                raw = self._fetch(link)
                meta = parse_metadata(raw, link.filename, where=link.redacted_url)
                # no fsync: a torn entry fails the name/version check and is
                # fetched again
                atomic_write_bytes(self._entry(key), raw, durable=False)
            self._memo[memo] = meta
            return meta

    def is_local(self, link: Link) -> bool:
        """Whether :meth:`get` needs no request for ``link``: read already, in
        the cache, or --offline (which never asks)."""
        key = self._key(link)
        return (self._offline or f"{key} {link.filename}" in self._memo
                or self._entry(key).is_file())

    def _key(self, link: Link) -> str:
        """The cache key: the file's, and for an sdist also what its build
        environment is given (:meth:`SdistReader.salt`)."""
        key = cache_key(link)
        if self._sdists is not None and not link.is_wheel:
            key += self._sdists.salt(link)
        return key

    def _entry(self, key: str) -> Path:
        return self._dir / f"{key}.metadata"

    def _from_cache(self, key: str, link: Link) -> WheelMetadata | None:
        entry = self._entry(key)
        try:
            raw = entry.read_bytes()
        except OSError:
            return None
        try:
            return parse_metadata(raw, link.filename, where=str(entry))
        except MetadataError:
            entry.unlink(missing_ok=True)  # another wheel's entry: fetch afresh
            return None

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    def _fetch(self, link: Link) -> bytes:
        if link.is_wheel and is_local(link.url):  # a folder index: the file itself
            return _read_local(local_path(link.url), link)
        if not link.is_wheel:
            local = None
        elif link.sha256:
            local = self._store.path_for(link.sha256)
        else:  # no hash from the index: what this URL gave last time
            found = self._store.sha256_for_url(link.url)
            local = self._store.path_for(found) if found else None
        if local is not None:
            return _read_local(local, link)
        if self._offline:
            raise MetadataError(
                f"{link.redacted_url}: METADATA of {link.filename} is not cached",
                hint="run once without --offline to fill the cache",
            )
        if not link.is_wheel:
            if self._sdists is None:
                raise MetadataError(f"{link.redacted_url}: an sdist, and this "
                                    "resolution reads wheels only")
            return self._sdists.read(link)
        try:
            raw = self._remote(link)
            if raw is not None:
                return raw
            path, _sha = self._store.fetch(
                self._http,
                link.url,
                expected_sha256=link.sha256,
                size=link.size,
                progress=None,
            )
        except httpx.HTTPError as exc:
            raise MetadataError(
                f"{link.redacted_url}: cannot read METADATA "
                f"({describe_http_error(exc)})",
                hint=_hint_for(exc), network=is_network_failure(exc),
            ) from exc
        except ZipReadError as exc:
            raise MetadataError(
                f"{link.redacted_url}: cannot read METADATA: {exc}",
                hint="the wheel or the server's range answers are broken; "
                "exclude this version or use another index",
            ) from exc
        except StacklockError:
            raise
        self._count(path.stat().st_size)
        return _read_local(path, link)

    def _remote(self, link: Link) -> bytes | None:
        """METADATA without the whole wheel (PEP 658, range reads); None: read
        the whole wheel through the store. With an archive in the store, a
        wheel of known sha256 whose URL is gone (403/404/410, unknown host)
        is read from the archive's copy, as install reads it (with
        ``archive.first``, there first)."""
        archive = self._store.archive if link.sha256 else None
        if archive is not None and archive.first:
            return None
        try:
            if link.metadata:
                raw = self._pep658(link)
                if raw is not None:
                    return raw
            return self._ranged(link)
        except httpx.HTTPError as exc:
            if archive is None or not _gone(exc):
                raise
            return None

    def _pep658(self, link: Link) -> bytes | None:
        """The PEP 658 file, or None when the index does not really have it."""
        response = self._get(link.metadata_url)
        if response.status_code in (403, 404, 410):
            return None
        response.raise_for_status()
        raw = response.content
        self._count(len(raw))
        if link.metadata_sha256:
            actual = hashlib.sha256(raw).hexdigest()
            if actual != link.metadata_sha256.lower():
                raise MetadataError(
                    f"{redact_url(link.metadata_url)}: sha256 {actual} differs from "
                    f"the index's {link.metadata_sha256}",
                    hint="the index or a proxy serves a wrong METADATA file",
                )
        return raw

    def _ranged(self, link: Link) -> bytes | None:
        """METADATA by range reads; None when the server ignores ``Range``."""
        reader = RangeReader(self._http, link.url, on_bytes=self._count,
                                        retry=self._retry)
        if not reader.open_tail(_TAIL, size_hint=link.size):
            return None
        kept = self._listings
        raw, entries = remote_zip.read_dist_info(
            reader, link.filename, listing=kept is not None,
            contains=kept.contains if kept is not None else b"")
        if kept is not None and entries is not None:
            kept.add(link.url, reader.size, entries)
        return raw

    def _get(self, url: str) -> httpx.Response:
        """GET with the retry policy (:class:`stacklock.http.Retry`)."""
        return self._retry.call(lambda _n: get(self._http, url))


def _gone(exc: httpx.HTTPError) -> bool:
    """Whether a failure says the file is gone from its URL, as
    :func:`stacklock.lockarchive.gone_reason` judges a download's."""
    from stacklock.lockarchive import GONE_STATUS, gone_reason

    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in GONE_STATUS
    return gone_reason(exc) is not None


def _hint_for(exc: httpx.HTTPError) -> str:
    status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else 0
    if status == 401:
        return "check the index credentials (in the URL or ~/.netrc)"
    if status == 403:
        return ("the host refuses the file (S3-backed hosts answer 403 for a "
                "missing one); re-resolve with --refresh")
    if isinstance(exc, httpx.TooManyRedirects):
        return "the wheel's URL redirects in a circle; check the index"
    if status in (404, 410):
        return "the file is gone from the index; re-resolve with --refresh"
    return "check the network or the index, or use --offline with a filled cache"


# a broken wheel on disk, or one without METADATA (KeyError)
_UNREADABLE: tuple[type[Exception], ...] = (*BROKEN_ARCHIVE, KeyError)


def _read_local(path: Path, link: Link) -> bytes:
    """METADATA from a whole wheel on disk."""
    try:
        with zipfile.ZipFile(path) as archive:
            member = remote_zip.pick_metadata(archive.namelist(), link.filename)
            return archive.read(member)
    except _UNREADABLE as exc:
        raise MetadataError(
            f"{link.redacted_url}: cannot read METADATA from {path}: {exc}",
            hint="delete the file from the cache and try again",
        ) from exc
    except ZipReadError as exc:
        raise MetadataError(f"{link.redacted_url}: {exc}") from exc
