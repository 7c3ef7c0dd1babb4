"""The profile's own project pages, asked for while the resolver still imports.

A cold ``stacklock resolve`` spends its first ~0.15 s importing the resolver,
packaging, httpx and the lock model before the first request goes out; on a
small set (torch + torchvision + torchaudio, ~0.6 s in all) that is a quarter of
the run. The first pages the resolution needs are known before any of that: the
project page of each requirement the profile names, on the index it will be read
from. :func:`start_early_pages` sends those GETs in threads right away
(:func:`stacklock.httpget.fetch_early`); the index client's request for the same
URL with the same headers takes the answer instead of asking again.

Only what the client would send unchanged is asked early: remote simple
indexes, no credentials in the URL, and no page the cache still holds fresh
(with ``--refresh``, every one). A page the client asks for differently (an
index the profile pins elsewhere, a netrc login, a conditional request) is
simply asked again; nothing is asked under ``--offline`` or behind a proxy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from stacklock._fs import cache_dir as default_cache_dir
from stacklock.index.cache import PageCache
from stacklock.index.local import is_local

if TYPE_CHECKING:
    from collections.abc import Mapping

    from stacklock.profile import Profile

__all__ = ["MAX_EARLY", "early_page_urls", "start_early_pages"]

MAX_EARLY = 8  # pages asked early at most (the profile's direct requirements)


def early_page_urls(profile: Profile, *, cache_dir: Path, refresh: bool,
                    now: float | None = None) -> list[str]:
    """The project pages of the profile's requirements worth asking early (see
    the module docstring), in the profile's order."""
    cache = PageCache(Path(cache_dir) / "pages")
    now = time.time() if now is None else now
    urls: list[str] = []
    for req in profile.requirements.packages:
        name = canonicalize_name(req.name)
        index = next((i for i in profile.indexes if name in i.packages), None) or (
            profile.indexes[0] if profile.indexes else None)
        if index is None or index.kind == "flat" or is_local(index.url):
            continue
        url = f"{index.url.rstrip('/')}/{name}/"
        if "@" in urlsplit(url).netloc or url in urls:
            continue
        if not refresh and cache.is_fresh(url, now):
            continue
        urls.append(url)
    return urls[:MAX_EARLY]


def start_early_pages(profile_name: str, *, index_urls: Mapping[str, str],
                      offline: bool, refresh: bool,
                      cache_dir: Path | None = None) -> list[str]:
    """Ask for the profile's pages early; returns the URLs asked. A profile
    that does not load is left to the resolution to report."""
    from stacklock.http import (
        CONNECT_TIMEOUT,
        TIMEOUT,
        USER_AGENT,
        proxied,
        ssl_context,
    )
    from stacklock.profile import load_profile

    if offline or proxied():
        return []
    try:
        profile = load_profile(profile_name)
        if index_urls:
            profile = profile.with_index_urls(dict(index_urls))
    except Exception:  # the resolution says what is wrong, once
        return []
    urls = early_page_urls(profile, cache_dir=cache_dir or default_cache_dir(),
                           refresh=refresh)
    if urls:
        from stacklock.httpget import fetch_early
        from stacklock.index.client import ACCEPT  # what the client sends

        fetch_early(urls, {"Accept": ACCEPT}, context=ssl_context,
                    user_agent=USER_AGENT,
                    timeout={"connect": CONNECT_TIMEOUT, "read": TIMEOUT,
                             "write": TIMEOUT, "pool": TIMEOUT})
    return urls
