"""Give every locked wheel exactly one sha256.

Most indexes state it (PyPI always does). Where an index states none (PyTorch's
nightlies) or lists one filename under several different hashes (the sgl-kernel
index), the file is streamed once into the content-addressed artifact store, hashed
there, and ``install`` later reuses those bytes. When the index listed hashes, the
downloaded one must be among them; anything else is refused, since it means the
bytes are not what the index said it served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stacklock.errors import HashMismatchError
from stacklock.urls import redact_url, strip_credentials

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    import httpx

    from stacklock.resolve.model import Candidate
    from stacklock.resolve.preferences import LockedPin
    from stacklock.store import ArtifactStore

__all__ = ["LockedWheel", "known_wheel", "settle_wheel"]

@dataclass(frozen=True, kw_only=True)
class LockedWheel:
    filename: str
    url: str  # credentials stripped
    sha256: str
    hash_source: str  # "index" | "download"
    size: int | None = None
    upload_time: datetime | None = None


def settle_wheel(
    candidate: Candidate,
    *,
    store: ArtifactStore,
    http: httpx.Client,
    progress: Callable[[str, int, int | None], None] | None = None,
    locked: LockedPin | None = None,
) -> LockedWheel:
    """The best wheel of ``candidate`` with one trustworthy sha256. ``locked``
    is what the existing lock holds of the project: at the same version its file
    is kept while the index still lists it, and its sha256 where the index gives
    no single one (so a wheel hashed by download is not downloaded again)."""
    known = known_wheel(candidate, locked)
    if known is not None:
        return known
    link, listed, size = _chosen_file(candidate, locked)
    callback = None
    if progress is not None:
        def callback(done: int, total: int | None) -> None:
            progress(link.filename, done, total)
    _, sha = store.fetch(http, link.url, size=size, progress=callback)
    if listed and sha not in listed:
        raise HashMismatchError(url=redact_url(link.url),
                                expected="one of " + ", ".join(listed), actual=sha)
    return _wheel(link, sha, "download", size)


def known_wheel(candidate: Candidate,
                locked: LockedPin | None = None) -> LockedWheel | None:
    """The file :func:`settle_wheel` records for ``candidate`` when its sha256
    is known without a download (the index lists one, or the lock has it);
    None when it is not."""
    link, listed, size = _chosen_file(candidate, locked)
    if len(listed) == 1:
        return _wheel(link, listed[0], "index", size)
    if locked is not None and locked.version == candidate.version and \
            locked.filename == link.filename and \
            locked.sha256 and (not listed or locked.sha256 in listed):
        return _wheel(link, locked.sha256, locked.hash_source, size)
    return None


def _chosen_file(candidate: Candidate, locked: LockedPin | None
                 ) -> tuple[Any, list[str], int | None]:
    """The link the lock records for ``candidate`` (the locked file while the
    index lists it), the sha256s the index gives for that filename, its size."""
    if locked is not None and locked.version != candidate.version:
        locked = None
    link = candidate.best.link
    if locked is not None:
        link = next((e.link for e in candidate.evaluations
                     if e.link.filename == locked.filename), link)
    same_file = [e.link for e in candidate.evaluations
                 if e.link.filename == link.filename]
    listed = sorted({lk.sha256.lower() for lk in same_file if lk.sha256})
    size = next((lk.size for lk in same_file if lk.size), None)
    return link, listed, size


def _wheel(link: Any, sha256: str, source: str, size: int | None) -> LockedWheel:
    return LockedWheel(filename=link.filename, url=strip_credentials(link.url),
                       sha256=sha256, hash_source=source, size=size,
                       upload_time=link.upload_time)
