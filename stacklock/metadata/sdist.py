"""An sdist's metadata for the resolver.

:class:`~stacklock.metadata.MetadataFetcher` caches it by the sdist's sha256 (by
URL when the index gives none), so a second run reads no network bytes and
builds nothing; :meth:`SdistReader.read` tries, in order:

1. the sdist's PKG-INFO, read from the front of the archive
   (:mod:`stacklock.metadata.sdist_archive`), when PEP 643 says it is the metadata the
   built wheel will have;
2. its ``pyproject.toml`` ``[project]`` table, when PEP 621 says the resolver's fields
   are static there (:mod:`stacklock.metadata.pyproject`), read in the same pass;
3. PEP 517 ``prepare_metadata_for_build_wheel`` on the downloaded sdist
   (:mod:`stacklock.metadata.build`) on the target's Python; the sdist stays in the
   artifact store, where ``install`` finds it.

Which of these answered (and for a build, on which interpreter and against which
runtime pins) is kept beside the cached metadata (:meth:`SdistReader.how`), and
the lock records it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from stacklock._fs import atomic_write_bytes
from stacklock.errors import MetadataError
from stacklock.http import describe_http_error
from stacklock.index.links import parse_filename, project_of
from stacklock.metadata.build import (
    BuildPython,
    BuildSetup,
    find_build_python,
    prepare_metadata,
)
from stacklock.metadata.parse import cache_key
from stacklock.metadata.pkg_info import untrusted_reason
from stacklock.metadata.pyproject import static_project_metadata
from stacklock.metadata.sdist_archive import ARCHIVE_ERRORS, read_remote_sdist_files
from stacklock.store import ArtifactStore

if TYPE_CHECKING:
    from collections.abc import Mapping

    from stacklock.index.links import Link

FROM_PKG_INFO = "PKG-INFO (PEP 643)"
FROM_PYPROJECT = "pyproject.toml [project] (PEP 621)"

__all__ = ["SdistReader"]


class SdistReader:
    """Reads an sdist's metadata for :class:`~stacklock.metadata.MetadataFetcher`,
    which caches it by the sdist's sha256; safe to call from many threads.
    ``setup`` says how builds run (None: refuse to build). ``bytes_read`` counts
    response-body bytes; ``built`` the sdists whose metadata a PEP 517 build
    prepared in this run; ``python`` the interpreter builds ran on (found at
    the first build)."""

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
        self._dir = Path(cache_dir) / "metadata"
        self._lock = threading.Lock()
        self._python_lock = threading.Lock()
        self.python: BuildPython | None = None
        self.bytes_read = 0
        self.built: list[str] = []

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    def salt(self, link: Link) -> str:
        """What the cache key of this sdist's metadata adds: the extra
        requirements its build environment gets (``build-requires``, the
        ``match-runtime`` pins), whose versions the metadata may depend on."""
        extra = self._extra(link)
        if not extra:
            return ""
        return "-with-" + hashlib.sha256("\n".join(extra).encode()).hexdigest()[:16]

    def how(self, link: Link) -> str | None:
        """How this sdist's metadata was had (:data:`FROM_PKG_INFO`,
        :data:`FROM_PYPROJECT`, or the build's interpreter and pins), as kept
        beside the cached metadata; None if unknown."""
        try:
            return self._how_path(link).read_text("utf-8").strip() or None
        except OSError:
            return None

    def _how_path(self, link: Link) -> Path:
        return self._dir / f"{cache_key(link)}{self.salt(link)}.how"

    def _extra(self, link: Link) -> tuple[str, ...]:
        if self._setup is None:
            return ()
        name = project_of(link.filename) or ""
        return tuple(sorted(self._setup.build_requires.get(name, ())))

    def _note(self, link: Link, how: str) -> None:
        atomic_write_bytes(self._how_path(link), how.encode("utf-8") + b"\n",
                           durable=False)

    def read(self, link: Link) -> bytes:
        """PKG-INFO where PEP 643 lets it stand for the built wheel's METADATA,
        else pyproject.toml's ``[project]`` where PEP 621 makes the fields
        used static, else the METADATA a PEP 517 backend prepares."""
        kept = bytearray()
        try:
            found = read_remote_sdist_files(
                self._http, link.url, link.filename, on_bytes=self._count,
                size_hint=link.size, keep=kept,
                enough=lambda found: _enough(found, link.filename))
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
        raw = found.get("PKG-INFO")
        why = "the sdist has no PKG-INFO" if raw is None else untrusted_reason(raw)
        if raw is not None and why is None:
            self._note(link, FROM_PKG_INFO)
            return raw
        static = _from_pyproject(found.get("pyproject.toml"), link.filename)
        if isinstance(static, bytes):
            self._note(link, FROM_PYPROJECT)
            return static
        return self._build(link, f"{why}, and {static}", kept)

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
        python = self._find_python(self._setup)
        raw = prepare_metadata(path, project=name, filename=link.filename,
                               setup=self._setup, python=python)
        extra = self._extra(link)
        self._note(link, f"PEP 517 build on {python.describe}"
                   + (f" with {', '.join(extra)}" if extra else ""))
        with self._lock:
            self.built.append(link.filename)
        return raw

    def _find_python(self, setup: BuildSetup) -> BuildPython:
        """The target's interpreter, found once per run (first build)."""
        with self._python_lock:
            if self.python is None:
                self.python = find_build_python(setup)
            return self.python


def _enough(found: Mapping[str, bytes], filename: str) -> bool:
    """Reading may stop: PKG-INFO is trusted, pyproject.toml's fields are
    static (meson-python and hatchling write PKG-INFO last: a 30 MB scipy sdist
    is then not read to its end), or both files are in hand."""
    pkg_info = found.get("PKG-INFO")
    if pkg_info is not None and ("pyproject.toml" in found
                                 or untrusted_reason(pkg_info) is None):
        return True
    return isinstance(_from_pyproject(found.get("pyproject.toml"), filename), bytes)


def _from_pyproject(raw: bytes | None, filename: str) -> bytes | str:
    """METADATA from the sdist's pyproject.toml, or why not."""
    parsed = parse_filename(filename)
    if raw is None or isinstance(parsed, str):
        return "it has no pyproject.toml"
    name, version, _build, _tags = parsed
    return static_project_metadata(raw, project=name, version=str(version))
