"""The HTTP client every network verb shares.

One ``httpx.Client`` per run (one connection pool), made here and passed down to
whatever talks to an index, NVIDIA or a file host.
"""

from __future__ import annotations

from typing import Any

import httpx

from stacklock import __version__

__all__ = ["make_http_client"]


def make_http_client(*, timeout: float = 30.0, **kwargs: Any) -> httpx.Client:
    """The one client a run shares: pooled, redirects followed, a per-request
    timeout (connect 10 s), and a User-Agent naming stacklock."""
    kwargs.setdefault("timeout", httpx.Timeout(timeout, connect=10.0))
    kwargs.setdefault("follow_redirects", True)
    kwargs.setdefault("limits", httpx.Limits(max_connections=16))
    kwargs.setdefault("headers", {"User-Agent": f"stacklock/{__version__}"})
    return httpx.Client(**kwargs)
