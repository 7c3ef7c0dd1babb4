"""The search alone, on every position of a culprit: pure, no installs."""

from __future__ import annotations

import math
from itertools import combinations

import pytest

from stacklock.bisect.changes import Change, ChangeGraph, Group
from stacklock.bisect.oracle import BAD, GOOD, SKIP
from stacklock.bisect.search import find_culprits


def _graph(n: int, needs: dict[int, set[int]] | None = None) -> ChangeGraph:
    groups = [Group(changes=(Change(name=f"p{i:02d}", kind="upgraded", old="1",
                                    new="2"),)) for i in range(n)]
    return ChangeGraph(groups, [(needs or {}).get(i, set()) for i in range(n)])


def _oracle(breaks: list[set[int]], skips: set[frozenset[int]] = frozenset()):
    """BAD when some set in ``breaks`` is applied whole; counts its calls."""
    calls: list[frozenset[int]] = []

    def test(applied: frozenset[int]) -> str:
        calls.append(applied)
        if applied in skips:
            return SKIP
        return BAD if any(b <= applied for b in breaks) else GOOD

    return test, calls


@pytest.mark.parametrize("n", [1, 2, 3, 7, 14, 33])
def test_one_culprit_anywhere_within_log2_plus_two(n: int) -> None:
    for culprit in range(n):
        test, calls = _oracle([{culprit}])
        found = find_culprits(_graph(n), test)
        assert [f.groups for f in found] == [frozenset({culprit})]
        assert found[0].verified is True and found[0].confirmed is True
        # the search and the two verifications; the ends are the caller's
        assert len(set(calls)) <= math.ceil(math.log2(n)) + 2


@pytest.mark.parametrize("pair", list(combinations(range(6), 2)))
def test_two_changes_that_only_break_together(pair: tuple[int, int]) -> None:
    test, _ = _oracle([set(pair)])
    found = find_culprits(_graph(6), test)
    assert found[0].groups == frozenset(pair) and found[0].verified is True


def test_three_that_break_together() -> None:
    test, _ = _oracle([{1, 4, 8}])
    found = find_culprits(_graph(10), test)
    assert found[0].groups == frozenset({1, 4, 8})


def test_two_culprits_each_breaking_alone_are_both_found() -> None:
    test, _ = _oracle([{2}, {7}])
    found = find_culprits(_graph(10), test)
    assert [f.groups for f in found] == [frozenset({2}), frozenset({7})]
    assert [f.verified for f in found] == [False, True]


def test_what_a_culprit_needs_moves_with_it() -> None:
    # group 5 needs group 1 (say, numpy 2 needs the scipy that allows it)
    test, calls = _oracle([{5}])
    found = find_culprits(_graph(8, {5: {1}}), test)
    assert found[0].groups == frozenset({5})
    assert found[0].moved == frozenset({1, 5})
    assert all(5 not in c or 1 in c for c in calls)  # never tried without it


def test_a_skipped_state_is_stepped_around() -> None:
    test, _ = _oracle([{6}], skips={frozenset(range(4))})
    found = find_culprits(_graph(8), test)
    assert found[0].groups == frozenset({6}) and not found[0].ambiguous


def test_states_that_only_skip_keep_their_groups_together() -> None:
    skips = {frozenset(range(k)) for k in (4, 5, 6)}
    test, _ = _oracle([{4}], skips=skips)
    found = find_culprits(_graph(8), test)
    assert found[0].ambiguous and frozenset({4}) <= found[0].groups
