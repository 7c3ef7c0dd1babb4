"""The resolver that remembers pin checks resolves exactly as resolvelib does.

A small index with a conflict that forces backtracking is resolved twice with
the same provider, by resolvelib's own ``Resolver`` (the oracle) and by
``PinMemoResolver``: the pins, the graph and the order of pinning are the same,
and the memo asks the provider fewer questions (pin checks, and preferences
of a provider whose preference reads only the requirements).
"""

from __future__ import annotations

from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version
from resolvelib import AbstractProvider, BaseReporter, Resolver

from stacklock.resolve.engine import PinMemoResolver

# project -> version -> requirements; app 2.0 wants b>=2, whose versions need
# c>=2, which every version of a refuses (c<2): the resolver tries app 2.0 with
# each a, then backtracks to app 1.0
INDEX: dict[str, dict[str, list[str]]] = {
    "app": {"1.0": ["a", "b"], "2.0": ["a", "b>=2"]},
    "a": {"1.0": ["c<2"], "2.0": ["c<2", "d"], "3.0": ["c<2", "d>=2"]},
    "b": {"1.0": ["c"], "2.0": ["c>=2"], "2.1": ["c>=2", "d<3"]},
    "c": {"1.0": [], "1.5": ["d"], "2.0": [], "2.5": ["d>=2"]},
    "d": {"1.0": [], "2.0": [], "3.0": []},
}


class _Candidate:
    def __init__(self, name: str, version: str) -> None:
        self.name, self.version = name, Version(version)

    def __repr__(self) -> str:
        return f"{self.name} {self.version}"


class _Provider(AbstractProvider):  # type: ignore[type-arg]
    # its preference reads the identifier only
    preference_reads_only_requirements = True

    def __init__(self) -> None:
        self.asked = 0
        self.preferences = 0

    def identify(self, requirement_or_candidate: Any) -> str:
        return str(requirement_or_candidate.name)

    def get_preference(self, identifier: str, *args: Any, **kwargs: Any) -> Any:
        self.preferences += 1
        return identifier

    def find_matches(self, identifier: str, requirements: Any,
                     incompatibilities: Any) -> list[_Candidate]:
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        found = [_Candidate(identifier, v) for v in INDEX[identifier]]
        return sorted((c for c in found if c.version not in bad and all(
            c.version in r.specifier for r in reqs)),
            key=lambda c: c.version, reverse=True)

    def is_satisfied_by(self, requirement: Any, candidate: Any) -> bool:
        self.asked += 1
        return bool(candidate.version in requirement.specifier)

    def get_dependencies(self, candidate: Any) -> list[Requirement]:
        return [Requirement(r) for r in INDEX[candidate.name][str(candidate.version)]]


class _Pins(BaseReporter):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.pinned: list[str] = []

    def pinning(self, candidate: Any) -> None:
        self.pinned.append(repr(candidate))


def _resolve(kind: type[Resolver]) -> tuple[dict[str, str], list[Any], list[str],
                                            int, int]:
    provider, reporter = _Provider(), _Pins()
    result = kind(provider, reporter).resolve([Requirement("app")], max_rounds=200)
    pins = {k: str(v.version) for k, v in result.mapping.items()}
    edges = sorted((str(a), str(b)) for a in result.graph
                   for b in result.graph.iter_children(a))
    return pins, edges, reporter.pinned, provider.asked, provider.preferences


def test_memo_resolves_as_resolvelib_and_asks_less() -> None:
    pins, edges, order, asked, preferred = _resolve(Resolver)
    memo_pins, memo_edges, memo_order, memo_asked, memo_preferred = _resolve(
        PinMemoResolver)
    assert (memo_pins, memo_edges, memo_order) == (pins, edges, order)
    assert pins["app"] == "1.0"  # app 2.0 cannot be had: the backtracking ran
    assert len(order) > len(pins)  # some pins were tried and given up
    assert memo_asked < asked
    assert memo_preferred < preferred
