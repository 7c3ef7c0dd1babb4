"""The held-out requirement sets (tests/data/requirement-sets/): real
requirements files of public repositories, and uv's recorded answer for each
(scripts/compare_uv.py --record). Offline: each set becomes a valid profile, and
uv's pins (where uv locked it) satisfy every requirement of the set on the target,
so a later live comparison compares like with like."""

from __future__ import annotations

import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts._sets import SETS, parse_pins, profile_text, read_sets
from stacklock.profile import parse_profile
from stacklock.target import Target

ALL = read_sets()
ENV = {**Target(python="3.12").marker_environment(), "extra": ""}


def test_there_are_forty_sets_or_more_each_with_its_source():
    assert len(ALL) >= 40
    for item in ALL:
        repo, _, rest = item.source.partition("/")
        assert repo and "@" in rest and len(rest.rsplit("@", 1)[1]) == 40, item


@pytest.mark.parametrize("item", ALL, ids=[s.name for s in ALL])
def test_each_set_is_a_profile_and_uv_s_recorded_pins_satisfy_it(item):
    profile = parse_profile(tomllib.loads(profile_text(
        item.requirements, exclude_newer="2026-12-01T00:00:00Z")), name=item.name)
    assert [str(r) for r in profile.requirements.packages] == [
        str(Requirement(r)) for r in item.requirements]
    recorded = (SETS / "uv" / f"{item.name}.txt").read_text()
    if recorded.startswith("# uv error: "):
        assert len(recorded.splitlines()) == 1  # the error, and no pins
        return
    pins = parse_pins(recorded)
    assert pins, recorded
    for text in item.requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(ENV):
            continue  # not for the target: nothing to satisfy
        version = pins.get(canonicalize_name(req.name))
        assert version is not None, f"uv locked no {req.name} for {text!r}"
        assert req.specifier.contains(version, prereleases=True), (text, version)


def test_every_recorded_answer_belongs_to_a_set():
    names = {s.name for s in ALL}
    recorded = {p.stem for p in (SETS / "uv").glob("*.txt")}
    assert recorded == names
