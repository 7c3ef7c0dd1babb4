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
import re
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    NormalizedName,
    canonicalize_name,
)
from packaging.version import InvalidVersion, Version

from stacklock import httpget
from stacklock._fs import atomic_write_bytes
from stacklock._lazy import lazy_module
from stacklock.errors import MetadataError, StacklockError, ZipReadError
from stacklock.index.links import parse_filename
from stacklock.metadata import remote_zip
from stacklock.metadata.ranges import RANGE_RETRY, RangeReader
from stacklock.store import ArtifactStore, describe_http_error
from stacklock.urls import redact_url, strip_credentials

if TYPE_CHECKING:
    import httpx

    from stacklock.http import Retry
    from stacklock.httpget import Reply
    from stacklock.index.pages import Link
    from stacklock.metadata.sdist import SdistReader
else:
    httpx = lazy_module("httpx")

__all__ = [
    "MetadataFetcher",
    "WheelMetadata",
    "parse_metadata",
    "parse_wheel_metadata",
]

_TAIL = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class WheelMetadata:
    """What the resolver needs from one wheel; ``raw`` is the METADATA file."""

    name: NormalizedName
    version: Version
    requires_dist: tuple[Requirement, ...]
    requires_python: SpecifierSet | None
    provides_extra: tuple[NormalizedName, ...]
    raw: bytes


def parse_wheel_metadata(raw: bytes, filename: str) -> WheelMetadata:
    """Parse METADATA bytes of the wheel ``filename`` and check they belong to it.

    Real wheels carry quirks that strict validation rejects (unknown fields, an old
    Metadata-Version with newer fields), so only the fields used are validated.
    """
    return parse_metadata(raw, filename, where=filename)


# The header fields the resolver reads, as METADATA spells them (lower case).
_WANTED = frozenset(
    ("name", "version", "requires-dist", "requires-python", "provides-extra"))
_ONCE = ("name", "version", "requires-python")
_FIELD = re.compile(r"[\x21-\x39\x3b-\x7e]+")


def _plain_fields(raw: bytes) -> dict[str, list[str]] | None:
    """The wanted header fields of a plain METADATA file, without the email parser.

    The email parser reads the whole file (descriptions run to 100 KB) and costs
    more than the rest of a cold resolution's metadata work. This reads only the
    header block and answers None for anything it does not read exactly as
    ``packaging.metadata.parse_email`` would (CR line ends, non-ASCII, folded or
    repeated single fields, a missing name or version); the caller then uses
    packaging.
    """
    end = raw.find(b"\n\n")
    head = raw.removesuffix(b"\n") if end < 0 else raw[:end]
    if b"\r" in head:
        return None
    found: dict[str, list[str]] = {}
    current = ""
    for line in head.decode("ascii", "surrogateescape").split("\n"):
        if line[:1] in (" ", "\t"):
            if current in _WANTED:
                return None  # a folded value: the email parser's rules apply
            continue
        field, colon, value = line.partition(":")
        if not colon or _FIELD.fullmatch(field) is None or line.startswith("From "):
            return None
        current = field.lower()
        if current in _WANTED:
            if not value.isascii():
                return None  # the email parser decodes these its own way
            found.setdefault(current, []).append(value.lstrip(" \t"))
    if any(len(found.get(key, ())) != 1 for key in _ONCE[:2]) or len(
        found.get("requires-python", ())
    ) > 1:
        return None
    return found


def parse_metadata(raw: bytes, filename: str, *, where: str) -> WheelMetadata:
    """METADATA of the wheel ``filename``, or the metadata of the wheel the
    sdist ``filename`` builds (its PKG-INFO or prepared METADATA), checked
    against the file name's project and version."""
    parsed = parse_filename(filename)
    if isinstance(parsed, str):
        raise MetadataError(f"{where}: {parsed}")
    wheel_name, wheel_version, _build, _tags = parsed
    try:
        plain = _plain_fields(raw)
        if plain is not None:
            found_name = plain["name"][0]
            name = canonicalize_name(found_name, validate=True)
            version = Version(plain["version"][0])
            requires_dist = tuple(
                Requirement(r) for r in plain.get("requires-dist", ()))
            python = plain.get("requires-python")
            requires_python = SpecifierSet(python[0]) if python else None
            provides_extra = tuple(
                canonicalize_name(e, validate=True)
                for e in plain.get("provides-extra", ())
            )
        else:  # the email parser: ~20 modules, imported for the rare file
            from packaging.metadata import Metadata

            meta = Metadata.from_email(raw, validate=False)
            found_name = meta.name
            name = canonicalize_name(meta.name)
            version = meta.version
            requires_dist = tuple(meta.requires_dist or ())
            requires_python = meta.requires_python
            provides_extra = tuple(meta.provides_extra or ())
    except (  # packaging's InvalidMetadata is a ValueError
        InvalidRequirement,
        InvalidSpecifier,
        InvalidVersion,
        KeyError,
        TypeError,
        ValueError,
    ) as exc:
        raise MetadataError(
            f"{where}: METADATA cannot be parsed: {exc}",
            hint="the file is malformed; exclude this version or report it upstream",
        ) from exc
    if name != wheel_name or version != wheel_version:
        raise MetadataError(
            f"{where}: METADATA says {found_name} {version}, "
            f"the filename says {wheel_name} {wheel_version}",
            hint="the index serves a wrong or renamed file; exclude this version",
        )
    return WheelMetadata(
        name=name,
        version=version,
        requires_dist=requires_dist,
        requires_python=requires_python,
        provides_extra=provides_extra,
        raw=raw,
    )


def _cache_key(link: Link) -> str:
    """The wheel's sha256 when known (content keyed), else a hash of URL + name."""
    if link.sha256:
        return link.sha256.lower()
    ident = f"{strip_credentials(link.url)}\n{link.filename}".encode()
    return "url-" + hashlib.sha256(ident).hexdigest()


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
    ) -> None:
        self._http = http
        self._retry = retry
        self._dir = Path(cache_dir) / "metadata"
        self._offline = offline
        self._store = store or ArtifactStore(Path(cache_dir) / "artifacts")
        self._lock = threading.Lock()
        self._memo: dict[str, WheelMetadata] = {}
        self._sdists = sdists
        self.bytes_read = 0

    def get(self, link: Link) -> WheelMetadata:
        """The METADATA of the wheel ``link`` points to (see the module docstring),
        or of the wheel the sdist ``link`` points to will build."""
        key = _cache_key(link)
        memo = f"{key} {link.filename}"
        with _KEY_LOCKS_GUARD:
            key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
        # one fetch per wheel, however many threads (or fetchers: the early
        # reads of stacklock.resolve.early have their own) ask
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
        key = _cache_key(link)
        return (self._offline or f"{key} {link.filename}" in self._memo
                or self._entry(key).is_file())

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
            if link.metadata:
                raw = self._pep658(link)
                if raw is not None:
                    return raw
            raw = self._ranged(link)
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
                hint=_hint_for(exc),
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
        return remote_zip.read_dist_info_metadata(reader, link.filename)

    def _get(self, url: str) -> Reply:
        """GET with a few retries on connection errors and 5xx."""
        for attempt in self._retry:
            last = self._retry.is_last(attempt)
            try:
                response = httpget.get(self._http, url)
            except httpx.TransportError:
                if last:
                    raise
                continue
            if response.status_code < 500 or last:
                return response
        raise AssertionError("unreachable")


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


def _read_local(path: Path, link: Link) -> bytes:
    """METADATA from a whole wheel on disk."""
    try:
        with zipfile.ZipFile(path) as archive:
            member = remote_zip.pick_metadata(archive.namelist(), link.filename)
            return archive.read(member)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise MetadataError(
            f"{link.redacted_url}: cannot read METADATA from {path}: {exc}",
            hint="delete the file from the cache and try again",
        ) from exc
    except ZipReadError as exc:
        raise MetadataError(f"{link.redacted_url}: {exc}") from exc
