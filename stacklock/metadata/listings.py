"""Central directories that METADATA reads saw whole, kept for the native check.

A wheel's METADATA is read from a 64 KiB tail of the zip
(:func:`~stacklock.metadata.remote_zip.read_dist_info`), and for most wheels that
tail holds the whole central directory. The native check lists the same wheel's
members to find its shared objects; with the directory kept here it makes no
request for that (a ``py3-none-any`` wheel without a library: none at all).

Only the entries the ``keep`` test wants are kept, which the verb wiring both
readers passes in (the native check's own test of a shared-object name: this
layer knows nothing of ELF), with the file's size. Entries are kept by the
wheel's URL, credentials stripped: PyTorch's nightly links carry no sha256.
One :class:`Listings` lives as long as one resolve, in memory only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from stacklock.metadata.remote_zip import Entry

__all__ = ["Listing", "Listings"]


@dataclass(frozen=True, kw_only=True)
class Listing:
    """The kept entries of one wheel's central directory, and the wheel's size
    (in bytes, as the server said when the tail was read)."""

    size: int
    entries: tuple[Entry, ...]


class Listings:
    """Kept central directories by wheel URL; safe to use from threads."""

    def __init__(self, keep: Callable[[str], bool], *, contains: bytes = b"") -> None:
        self._keep = keep
        # a piece of every name ``keep`` wants, for the directory's parser to
        # skip the other entries before making them
        self.contains = contains
        self._lock = threading.Lock()
        self._by_url: dict[str, Listing] = {}

    def add(self, url: str, size: int, entries: Iterable[Entry]) -> None:
        """Keep what ``keep`` wants of a whole directory the tail held."""
        listing = Listing(size=size,
                          entries=tuple(e for e in entries if self._keep(e.name)))
        with self._lock:
            self._by_url[strip_credentials(url)] = listing

    def get(self, url: str) -> Listing | None:
        with self._lock:
            return self._by_url.get(strip_credentials(url))
