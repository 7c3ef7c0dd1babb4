"""Read and evaluate index pages in worker processes.

A large resolution reads a few hundred pages with some hundred thousand links
(numpy, grpcio and torch list thousands of files each); parsing and evaluating
them for the target is pure Python and holds the GIL, so threads alone leave every
core but one idle. The workers run the same index client and finder, sharing the
on-disk page cache, and send back only the compatible wheels, which are few. The
main process keeps the resolver and the METADATA reads (I/O-bound, threaded).

Used only when ``resolve_profile`` owns the HTTP client: an injected client (a
test's recorded transport) cannot travel to another process.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime
    from pathlib import Path

    from stacklock.profile import IndexSpec
    from stacklock.target import Target

__all__ = ["PagePool", "default_processes"]

_FINDER: Any = None


def default_processes() -> int:
    """Enough processes to keep every core busy and some pages in flight."""
    return max(2, min(8, 3 * (os.cpu_count() or 1)))


def _start(indexes: Sequence[IndexSpec], target: Target,
           exclude_newer: datetime | None, cache_dir: Path, offline: bool,
           refresh: bool) -> None:
    global _FINDER
    from stacklock.index.client import IndexClient, make_http_client
    from stacklock.index.finder import Finder

    client = IndexClient(make_http_client(), cache_dir=cache_dir, offline=offline,
                         refresh=refresh)
    _FINDER = Finder(client, indexes, target, exclude_newer=exclude_newer)


def _find_candidates(name: str) -> tuple[list[Any], dict[str, Any] | None]:
    """The candidates, or the error as plain data: StacklockError subclasses take
    keyword arguments, which exception pickling would lose."""
    from stacklock.errors import StacklockError

    try:
        return list(_FINDER.find_candidates(name)), None
    except StacklockError as exc:
        return [], {"type": type(exc), "message": exc.message, "hint": exc.hint,
                    "attrs": {k: v for k, v in vars(exc).items()
                              if k not in ("message", "hint")}}


def _raise(error: dict[str, Any]) -> None:
    from stacklock.errors import StacklockError

    exc = error["type"].__new__(error["type"])
    StacklockError.__init__(exc, error["message"], hint=error["hint"])
    vars(exc).update(error["attrs"])
    raise exc


class PagePool:
    """``find_candidates(name)`` answered by a worker process."""

    def __init__(self, *, indexes: Sequence[IndexSpec], target: Target,
                 exclude_newer: datetime | None, cache_dir: Path, offline: bool,
                 refresh: bool, processes: int) -> None:
        # fork: no re-import of the caller's __main__ (a script without a main
        # guard works) and no interpreter start-up. All workers start here, at
        # once, before the resolver's threads exist (fork copies only this one).
        context = multiprocessing.get_context("fork")
        self._pool = ProcessPoolExecutor(
            max_workers=processes, mp_context=context, initializer=_start,
            initargs=(tuple(indexes), target, exclude_newer, cache_dir, offline,
                      refresh))
        self._pool.submit(int).result()

    def find_candidates(self, name: str) -> list[Any]:
        found, error = self._pool.submit(_find_candidates, name).result()
        if error is not None:
            _raise(error)
        return found

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
