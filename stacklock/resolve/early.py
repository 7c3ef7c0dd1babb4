"""The profile's own project pages, asked for while the resolver still imports.

A cold ``stacklock resolve`` spends its first ~0.15 s starting the interpreter
and importing the resolver and packaging before the resolver's first request;
on a small set (torch + torchvision + torchaudio, ~0.4 s in all) that is more
than a third of the run. The first pages the resolution needs are known
before any of that: the project page of each requirement the profile names, on
the index it will be read from. :func:`start_early_pages` sends those GETs in
threads right away (:func:`stacklock.httpget.fetch_early`); the index client's
request for the same URL with the same headers takes the answer instead of
asking again.

Only what the client would send unchanged is asked early: remote simple
indexes, no credentials in the URL, and no page the cache still holds fresh
(with ``--refresh``, every one). A page the client asks for differently (an
index the profile pins elsewhere, a netrc login, a conditional request) is
simply asked again; nothing is asked under ``--offline`` or behind a proxy.

The step after each page is known too: the METADATA of the newest version the
requirement allows, read by range requests, as the resolver's own prefetch
would read it first. :func:`read_first_metadata` does that in a thread per
requirement with the resolution's own classes (index client, finder, METADATA
fetcher) on a client of its own, and hands over through the cache: the page
and the METADATA land there, and the resolution reads them as a warm run
would. A requirement with a marker, an override or a constraint is left to the
resolver; a wrong guess costs one METADATA read, kept in the cache. Under
``--refresh`` only the pages are asked early: the resolution asks for every
page again rather than take one from the cache.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from stacklock._fs import cache_dir as default_cache_dir
from stacklock.index.cache import PageCache
from stacklock.index.local import is_local

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from packaging.requirements import Requirement
    from packaging.utils import NormalizedName

    from stacklock.profile import IndexSpec, Profile

__all__ = ["MAX_EARLY", "early_page_urls", "read_first_metadata",
           "start_early_pages"]

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
        index = _index_for(profile, name)
        if index is None or index.kind == "flat" or is_local(index.url):
            continue
        url = _page_url(index, name)
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
    cache_dir = cache_dir or default_cache_dir()
    urls = early_page_urls(profile, cache_dir=cache_dir, refresh=refresh)
    if urls:
        from stacklock.httpget import fetch_early
        from stacklock.index.client import ACCEPT  # what the client sends

        fetch_early(urls, {"Accept": ACCEPT}, context=ssl_context,
                    user_agent=USER_AGENT,
                    timeout={"connect": CONNECT_TIMEOUT, "read": TIMEOUT,
                             "write": TIMEOUT, "pool": TIMEOUT})
        if not refresh:  # a refreshing resolution asks for every page again
            threading.Thread(target=_read_quietly, args=(profile, urls, cache_dir),
                             name="stacklock-early-walk", daemon=True).start()
    return urls


def _read_quietly(profile: Profile, urls: Sequence[str], cache_dir: Path) -> None:
    try:
        read_first_metadata(profile, urls, cache_dir=cache_dir)
    except Exception:  # a client that cannot be made: the resolution says why
        pass


def read_first_metadata(profile: Profile, urls: Sequence[str], *,
                        cache_dir: Path) -> list[str]:
    """For each requirement of ``profile`` whose page is among ``urls``, the
    METADATA of the newest version it allows with a wheel that fits, read into
    the cache (see the module docstring); returns the wheels' file names. Each
    requirement has a thread, and asks only the index its early page came from;
    one that fails is left to the resolution."""
    from concurrent.futures import ThreadPoolExecutor

    from stacklock.http import make_http_client
    from stacklock.index.client import IndexClient
    from stacklock.index.finder import Finder
    from stacklock.metadata import MetadataFetcher
    from stacklock.resolve.source import candidates_of, first_fit

    spec = profile.requirements
    steered = {canonicalize_name(r.name) for r in (*spec.overrides, *spec.constraints)}
    wanted = []
    for req in spec.packages:
        name = canonicalize_name(req.name)
        index = _index_for(profile, name)
        if req.marker is None and name not in steered and index is not None and \
                _page_url(index, name) in urls:
            wanted.append((req, name, index))
    if not wanted:
        return []
    with make_http_client() as http:
        client = IndexClient(http, cache_dir=cache_dir)
        fetcher = MetadataFetcher(http, cache_dir=cache_dir)
        # one finder per index, over that index alone: no other index is asked
        finders = {index.name: Finder(client, [index], profile.target,
                                      exclude_newer=spec.exclude_newer,
                                      no_build=spec.no_build_all or spec.no_build)
                   for _, _, index in wanted}

        def first(req: Requirement, name: NormalizedName, index: IndexSpec
                  ) -> str | None:
            best = first_fit(candidates_of(finders[index.name], name), req.specifier,
                             allow_prereleases=name in spec.prereleases)
            if best is None or not best.best.link.is_wheel:
                return None  # nothing fits, or an sdist: its METADATA means a build
            fetcher.get(best.best.link)
            return best.best.link.filename

        def safely(item: tuple[Requirement, NormalizedName, IndexSpec]
                   ) -> str | None:
            try:
                return first(*item)
            except Exception:  # the resolution meets it again and reports it
                return None

        with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
            return [f for f in pool.map(safely, wanted) if f is not None]


def _page_url(index: IndexSpec, name: str) -> str:
    return f"{index.url.rstrip('/')}/{name}/"


def _index_for(profile: Profile, name: str) -> IndexSpec | None:
    """The index a requirement's early page is asked from: the one pinning it,
    else the first."""
    return next((i for i in profile.indexes if name in i.packages), None) or (
        profile.indexes[0] if profile.indexes else None)
