"""A rejected candidate starts the METADATA reads of the next ones offered.

The resolver tries the candidates of a project one after another; after a
rejection the provider starts reading ahead the METADATA of the next
``READ_AHEAD`` offered (recorded PyPI page of ``packaging``), in the background,
through the real metadata fetcher (its range reads answered 404 here: what is
checked is which files are asked for, and that nothing is asked twice).
"""

from __future__ import annotations

import threading
import time

import httpx
from packaging.requirements import Requirement as PepRequirement

from stacklock.index.finder import Finder
from stacklock.metadata import MetadataFetcher
from stacklock.profile import IndexSpec
from stacklock.resolve.provider import READ_AHEAD, StackProvider
from stacklock.resolve.rules import Rules
from stacklock.resolve.source import PackageSource
from stacklock.target import Target
from tests.helpers.data import PYPI_PAGES, read_fixture

PYPI = IndexSpec(name="pypi", url="https://pypi.org/simple")
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def _page(request: httpx.Request) -> httpx.Response:
    name = request.url.path.strip("/").split("/")[-1]
    return httpx.Response(200, headers={"content-type": JSON_TYPE},
                          content=read_fixture(PYPI_PAGES / f"{name}.json"))


class _Files:
    """The file host: records every URL asked for, has none of them."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.asked.append(str(request.url))
        return httpx.Response(404)

    def wait_for(self, count: int) -> list[str]:
        for _ in range(500):  # the reads run on the pool; give them time
            with self._lock:
                if len(self.asked) >= count:
                    return sorted(set(self.asked))
            time.sleep(0.01)
        return sorted(set(self.asked))


def test_a_rejection_reads_ahead_the_next_candidates(make_client, tmp_path):
    target = Target(python="3.12")
    env = target.marker_environment()
    files = _Files()
    finder = Finder(make_client(_page), [PYPI], target)
    with httpx.Client(transport=httpx.MockTransport(files)) as http:
        fetcher = MetadataFetcher(http, cache_dir=tmp_path / "meta")
        with PackageSource(finder, fetcher, environment=env, workers=4) as source:
            provider = StackProvider(source, Rules(environment=env))
            req = provider.rules.make(PepRequirement("packaging>=20"), parent=None)
            offered = list(provider.find_matches(req.identifier,
                                                 {req.identifier: iter([req])},
                                                 {req.identifier: iter(())})())
            assert len(offered) > 2 * READ_AHEAD
            provider.prefetch_after(offered[0])
            first = [c.best.link.url for c in offered[1:1 + READ_AHEAD]]
            assert files.wait_for(READ_AHEAD) == sorted(first)
            provider.prefetch_after(offered[1])  # one more: only the new one
            asked = files.wait_for(READ_AHEAD + 1)
            assert asked == sorted([*first, offered[1 + READ_AHEAD].best.link.url])
            assert offered[0].best.link.url not in asked  # nothing behind it
