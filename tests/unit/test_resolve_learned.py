"""What the resolver learns from its conflicts (stacklock.resolve.learned).

The case: google-cloud-spanner>=3.20 with sqlparse<=0.3.0 and
google-api-core>=2.10.1, over real PyPI pages recorded with
``scripts/record_resolution.py --metadata`` (the METADATA files read start in
the cache). Every spanner that takes sqlparse<=0.3.0 needs protobuf<5, and the
newest google-api-core needs protobuf>=6.33.5; resolvelib alone goes back one
googleapis-common-protos or protobuf release at a time and gives up after
5,000 rounds. Learned, the resolution reaches the pins ``uv pip compile``
chose (tests/data/resolve/derived-range.uv.txt).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement as PepRequirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from stacklock.errors import ResolutionError
from stacklock.http import make_http_client
from stacklock.index.finder import Finder
from stacklock.metadata import MetadataFetcher
from stacklock.profile import IndexSpec, load_profile
from stacklock.resolve import resolution
from stacklock.resolve.model import Candidate
from stacklock.resolve.provider import Restart, StackProvider
from stacklock.resolve.resolution import resolve_profile
from stacklock.resolve.rules import Rules
from stacklock.resolve.source import PackageSource
from stacklock.target import Target
from tests.helpers.cassette import ReplayTransport, seed_metadata
from tests.helpers.data import PYPI_PAGES, read_fixture
from tests.helpers.uv import parse_pins

DATA = Path(__file__).resolve().parents[1] / "data" / "resolve"
CASSETTE = DATA / "cassettes" / "derived-range"


def _resolve(tmp_path: Path):
    """The case over its recorded pages, its METADATA files in the cache."""
    cache = tmp_path / "cache"
    seed_metadata(CASSETTE, cache)
    profile = load_profile(str(DATA / "cases" / "derived-range.toml"))
    with make_http_client(transport=ReplayTransport(CASSETTE)) as http:
        return resolve_profile(profile, http=http, cache_dir=cache, prefetch=False)


def test_a_range_derived_from_every_spanner_reaches_uv_s_pins(tmp_path):
    res = _resolve(tmp_path)
    uv = parse_pins((DATA / "derived-range.uv.txt").read_text())
    assert res.pins() == uv
    # the provider moved back to the releases that take protobuf 4
    assert (uv["google-cloud-spanner"], uv["google-api-core"], uv["protobuf"]) == (
        "3.33.0", "2.30.3", "4.25.9")


def test_a_give_up_names_the_projects_its_rounds_went_to(tmp_path, monkeypatch):
    monkeypatch.setattr(resolution, "MAX_ROUNDS", 12)
    with pytest.raises(ResolutionError) as err:
        _resolve(tmp_path)
    text = str(err.value)
    head, _, named = text.partition("; the rounds went to choosing ")
    assert head == "profile 'derived-range': gave up after 12 resolver rounds"
    counts = [(part.rsplit(" (", 1)[0], int(part.rsplit(" (", 1)[1].split(")")[0]))
              for part in named.split(" (try:")[0].split(", ")]
    assert 1 <= len(counts) <= 4
    assert [n for _, n in counts] == sorted((n for _, n in counts), reverse=True)
    assert sum(n for _, n in counts) <= 12
    # projects the resolution read a page of, not something made up
    pages = {e["url"].rstrip("/").rsplit("/", 1)[-1] for e in json.loads(
        (CASSETTE / "cassette.json").read_text())["entries"]}
    assert {name for name, _ in counts} <= pages
    assert "[requirements] constraints" in err.value.hint


PYPI = IndexSpec(name="pypi", url="https://pypi.org/simple")


@pytest.fixture
def provider(make_client, tmp_path):
    """A provider over the recorded PyPI page of ``packaging``; the profile
    requires packaging<22."""
    target = Target(python="3.12")
    env = target.marker_environment()

    def page(request: httpx.Request) -> httpx.Response:
        name = request.url.path.strip("/").split("/")[-1]
        return httpx.Response(200, headers={
            "content-type": "application/vnd.pypi.simple.v1+json"},
            content=read_fixture(PYPI_PAGES / f"{name}.json"))

    finder = Finder(make_client(page), [PYPI], target)
    rules = Rules(environment=env)
    with httpx.Client(transport=httpx.MockTransport(
            lambda _: httpx.Response(404))) as http:
        fetcher = MetadataFetcher(http, cache_dir=tmp_path / "meta")
        with PackageSource(finder, fetcher, environment=env, workers=2,
                           prefetch=False) as source:
            roots = [rules.make(PepRequirement("packaging<22"), parent=None)]
            yield StackProvider(source, rules, roots=roots)


def test_dead_only_where_the_profile_s_own_requirements_leave_nothing(provider):
    rules = provider.rules
    one, two = (Candidate(name=canonicalize_name("consumer"), version=Version(v))
                for v in ("2.0", "1.0"))
    # packaging>=23 leaves nothing the profile's packaging<22 allows: consumer
    # 2.0 can never be taken, whatever else is chosen
    needs = rules.make(PepRequirement("packaging>=23"), parent=one)
    assert provider.learned.rejected(one, [needs])
    assert provider.learned.is_dead(one)
    # packaging>=20 leaves 20.x and 21.x: its conflict was with another
    # package's requirement, which says nothing about every answer
    ok = rules.make(PepRequirement("packaging>=20"), parent=two)
    assert not provider.learned.rejected(two, [ok])
    assert not provider.learned.is_dead(two)


def test_a_pre_release_a_range_assumed_away_restarts_without_learning(provider):
    rules = provider.rules
    provider.learned.assumed_final.add("packaging")
    final = [rules.make(PepRequirement("packaging>=21"), parent=None)]
    provider.find_matches("packaging", {"packaging": iter(final)},
                          {"packaging": iter(())})
    pre = [rules.make(PepRequirement("packaging>=22.0rc1"), parent=None)]
    with pytest.raises(Restart) as restart:
        provider.find_matches("packaging", {"packaging": iter(pre)},
                              {"packaging": iter(())})
    assert not restart.value.learn
    provider.forget()
    assert not provider.learned.assumed_final
    assert provider.find_matches("packaging", {"packaging": iter(pre)},
                                 {"packaging": iter(())})()
    # and learns nothing more: a candidate whose requirement leaves nothing
    # the profile allows is no longer found dead
    consumer = Candidate(name=canonicalize_name("consumer"), version=Version("1"))
    needs = rules.make(PepRequirement("packaging>=23"), parent=consumer)
    info = type("Info", (), {"requirement": needs, "parent": consumer})()
    provider.rejected(consumer, type("Criterion", (), {"information": [info]})())
    assert not provider.learned.is_dead(consumer)
