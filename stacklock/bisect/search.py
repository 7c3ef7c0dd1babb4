"""Delta debugging over the groups, by bisection: pure, given a test.

``test(groups)`` answers GOOD, BAD or SKIP for GOOD with those groups' changes
applied. The groups come in an order where what a group needs comes first, so a
prefix is a coherent set. One round finds the shortest failing prefix by
bisection (about log2(groups) tests; a skipped state is stepped around, as ``git
bisect skip`` does, and a range that only skips is kept whole): its last group
is a culprit. GOOD with the culprits found so far applied is tested; when it
passes, the culprit needs a partner, looked for the same way among the groups
before it with the culprits applied. So changes that only break together come
back together, and each member was needed (the set is 1-minimal for a monotone
oracle). The culprit is verified by reverting it from BAD; if BAD still fails
without it, the search goes on for the next one among the groups left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacklock.bisect.oracle import BAD, GOOD

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from stacklock.bisect.changes import ChangeGraph

__all__ = ["Found", "find_culprits"]


@dataclass(frozen=True, kw_only=True)
class Found:
    """One culprit: ``groups`` (the minimal set), ``moved`` (with what it
    needs), the tested states around it, whether reverting it from BAD passed
    (None: that state was skipped), and whether skipped states left groups
    that could not be told apart (``ambiguous``)."""

    groups: frozenset[int]
    moved: frozenset[int]
    last_good: frozenset[int]
    first_bad: frozenset[int]
    reverted: frozenset[int]  # the groups left at BAD in the verification
    verified: bool | None
    confirmed: bool  # GOOD with ``moved`` applied failed (not skipped)
    ambiguous: bool


def find_culprits(graph: ChangeGraph, test: Callable[[frozenset[int]], str],
                  *, most: int = 3) -> list[Found]:
    """Up to ``most`` culprits, in the order found (see the module doc).
    ``test`` of the empty set and of every group must already be GOOD / BAD."""
    everything = frozenset(range(len(graph.groups)))
    pool = list(range(len(graph.groups)))
    excluded: frozenset[int] = frozenset()
    out: list[Found] = []
    while pool and len(out) < most:
        found, last_good, state, ambiguous = _one_culprit(graph, pool, test)
        moved = graph.up(found)
        excluded = graph.down(found) | excluded
        rest = everything - excluded
        verdict = test(rest) if rest else GOOD
        out.append(Found(groups=frozenset(found), moved=moved, last_good=last_good,
                         first_bad=moved, reverted=rest,
                         verified=None if verdict not in (GOOD, BAD)
                         else verdict == GOOD,
                         confirmed=state == BAD, ambiguous=ambiguous))
        if verdict != BAD:
            break
        pool = [i for i in pool if i not in excluded]
    return out


def _one_culprit(graph: ChangeGraph, pool: Sequence[int],
                 test: Callable[[frozenset[int]], str]
                 ) -> tuple[list[int], frozenset[int], str, bool]:
    """(culprit groups, the last good state, GOOD+culprit's state, ambiguous)."""
    found: list[int] = []
    rest = list(pool)
    last_good: frozenset[int] = frozenset()
    ambiguous = False
    while True:
        lo, hi = _shortest_failing(graph, found, rest, test)
        ambiguous |= hi - lo > 1
        found += rest[lo:hi]
        rest = rest[:lo]
        state = test(graph.up(found))
        if state != GOOD or not rest:
            return found, last_good, state, ambiguous
        last_good = graph.up(found)


def _shortest_failing(graph: ChangeGraph, found: Sequence[int],
                      rest: Sequence[int], test: Callable[[frozenset[int]], str]
                      ) -> tuple[int, int]:
    """``(lo, hi)``: ``found`` + ``rest[:lo]`` passes, + ``rest[:hi]`` fails,
    and ``hi - lo`` is 1 unless every state between was skipped."""
    lo, hi = 0, len(rest)
    skipped: set[int] = set()
    while hi - lo > 1:
        middle = (lo + hi) / 2
        untried = sorted((m for m in range(lo + 1, hi) if m not in skipped),
                         key=lambda m: (abs(m - middle), m))
        if not untried:
            break
        m = untried[0]
        state = test(graph.up([*found, *rest[:m]]))
        if state == GOOD:
            lo = m
        elif state == BAD:
            hi = m
        else:
            skipped.add(m)
    return lo, hi
