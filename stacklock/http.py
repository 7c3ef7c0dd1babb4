"""The HTTP client every network verb shares, and the one retry policy.

One ``httpx.Client`` per run (one connection pool), made here and passed down to
whatever talks to an index, NVIDIA or a file host. Every loop that retries a
transient failure (index pages, range reads, METADATA files, downloads) draws its
attempts from a :class:`Retry`: the same backoff everywhere, and a ``sleep`` (and
``clock``) that tests replace so retries cost no time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stacklock import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import httpx

__all__ = ["RETRY_STATUS", "Retry", "make_http_client"]

# statuses worth asking again for: rate limits and server-side trouble
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def make_http_client(*, timeout: float = 30.0, **kwargs: Any) -> httpx.Client:
    """The one client a run shares: pooled, redirects followed, a per-request
    timeout (connect 10 s), and a User-Agent naming stacklock. httpx is imported
    here, by the first run that talks to the network (a warm install never does)."""
    import httpx

    kwargs.setdefault("timeout", httpx.Timeout(timeout, connect=10.0))
    kwargs.setdefault("follow_redirects", True)
    kwargs.setdefault("limits", httpx.Limits(max_connections=16))
    kwargs.setdefault("headers", {"User-Agent": f"stacklock/{__version__}"})
    return httpx.Client(**kwargs)


@dataclass(frozen=True, kw_only=True)
class Retry:
    """How often to try and how long to wait in between: ``backoff`` seconds
    before the second attempt, doubling after that, never more than
    ``max_delay``. ``total`` (seconds, by ``clock``) ends the attempts early
    when the next wait would pass it."""

    attempts: int = 3
    backoff: float = 0.4
    max_delay: float = 2.0
    total: float | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def delay(self, attempt: int) -> float:
        """The wait before attempt number ``attempt`` (2, 3, ...)."""
        return min(self.backoff * 2 ** (attempt - 2), self.max_delay)

    def __iter__(self) -> Iterator[int]:
        """Attempt numbers 1, 2, ..., waiting before each but the first. It stops
        early (a number below ``attempts`` was the last) when ``total`` would
        be passed; the loop's body decides what is worth another attempt."""
        deadline = None if self.total is None else self.clock() + self.total
        for attempt in range(1, max(1, self.attempts) + 1):
            if attempt > 1:
                delay = self.delay(attempt)
                if deadline is not None and self.clock() + delay > deadline:
                    return
                self.sleep(delay)
            yield attempt

    def is_last(self, attempt: int) -> bool:
        return attempt >= self.attempts
