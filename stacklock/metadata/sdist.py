"""An sdist's metadata for the resolver.

:class:`~stacklock.metadata.MetadataFetcher` caches it by the sdist's sha256 (by
URL when the index gives none), so a second run reads no network bytes and
builds nothing; :meth:`SdistReader.read` tries, in order:

1. the sdist's PKG-INFO, read from the front of the archive
   (:mod:`stacklock.metadata.sdist_archive`), when PEP 643 says it is the metadata the
   built wheel will have;
2. PEP 517 ``prepare_metadata_for_build_wheel`` on the downloaded sdist
   (:mod:`stacklock.metadata.build`); the sdist stays in the artifact store, where
   ``install`` finds it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from stacklock.errors import MetadataError
from stacklock.http import describe_http_error
from stacklock.index.links import project_of
from stacklock.metadata.build import BuildSetup, prepare_metadata
from stacklock.metadata.pkg_info import untrusted_reason
from stacklock.metadata.sdist_archive import ARCHIVE_ERRORS, read_remote_pkg_info
from stacklock.store import ArtifactStore

if TYPE_CHECKING:
    from stacklock.index.links import Link

__all__ = ["SdistReader"]


class SdistReader:
    """Reads an sdist's metadata for :class:`~stacklock.metadata.MetadataFetcher`,
    which caches it by the sdist's sha256; safe to call from many threads.
    ``setup`` says how builds run (None: refuse to build). ``bytes_read`` counts
    response-body bytes; ``built`` the sdists whose metadata a PEP 517 build
    prepared in this run."""

    def __init__(
        self,
        http: httpx.Client,
        *,
        cache_dir: Path,
        setup: BuildSetup | None,
        store: ArtifactStore | None = None,
    ) -> None:
        self._http = http
        self._setup = setup
        self._store = store or ArtifactStore(Path(cache_dir) / "artifacts")
        self._lock = threading.Lock()
        self.bytes_read = 0
        self.built: list[str] = []

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    def read(self, link: Link) -> bytes:
        """PKG-INFO where PEP 643 lets it stand for the built wheel's METADATA,
        else the METADATA a PEP 517 backend prepares."""
        kept = bytearray()
        try:
            raw = read_remote_pkg_info(self._http, link.url, link.filename,
                                       on_bytes=self._count, size_hint=link.size,
                                       keep=kept)
        except httpx.HTTPError as exc:
            raise MetadataError(
                f"{link.redacted_url}: cannot read the sdist "
                f"({describe_http_error(exc)})",
                hint="check the network or the index, or use --offline with a "
                "filled cache",
            ) from exc
        except ARCHIVE_ERRORS as exc:
            raise MetadataError(
                f"{link.redacted_url}: not a readable sdist archive: {exc}",
                hint="exclude this version or use another index",
            ) from exc
        why = "the sdist has no PKG-INFO" if raw is None else untrusted_reason(raw)
        if raw is not None and why is None:
            return raw
        return self._build(link, why or "", kept)

    def _stored(self, link: Link, kept: bytearray) -> Path | None:
        """The sdist already read whole (small, or PKG-INFO last), put in the
        store when its bytes are the ones the index states: no second download."""
        if not link.sha256 or (link.size is not None and link.size != len(kept)):
            return None
        if hashlib.sha256(kept).hexdigest() != link.sha256.lower():
            return None
        self._store.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".sdist-", dir=self._store.root)
        with os.fdopen(fd, "wb") as fh:
            fh.write(kept)
        return self._store.adopt(Path(tmp), link.sha256)

    def _build(self, link: Link, why: str, kept: bytearray) -> bytes:
        name = project_of(link.filename) or link.filename
        if self._setup is None:
            raise MetadataError(
                f"{link.filename}: {why}, and building sdists is turned off",
                hint=f"allow builds, or serve a wheel of {name} for the target",
            )
        path = self._stored(link, kept)
        if path is None:
            path, _sha = self._store.fetch(self._http, link.url,
                                           expected_sha256=link.sha256,
                                           size=link.size, progress=None)
            self._count(path.stat().st_size)
        raw = prepare_metadata(path, project=name, filename=link.filename,
                               setup=self._setup)
        with self._lock:
            self.built.append(link.filename)
        return raw
