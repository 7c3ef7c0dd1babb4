"""resolvelib's resolver, with the check it repeats most answered once.

On every round resolvelib asks, for every project seen so far, whether its
current pin still satisfies every requirement on it
(``Resolution._is_current_pin_satisfying``): ~60,000 checks for sglang, nearly
all asked before. resolvelib never changes a criterion once made (it builds a
new one whenever the requirements on a project change) nor a pin, so the answer
for one (criterion, pin) pair is fixed: :class:`PinMemoResolver` remembers it
per pair of objects. The answers, and so every resolution, are resolvelib's.

It asks the provider's ``get_preference`` ~9,000 times for sglang, again for
each unpinned project on every round. A provider whose preference reads only
the identifier and the requirements on it (not the pins, the candidates or the
backtrack causes) says so with ``preference_reads_only_requirements = True``;
its answer is then remembered per criterion too.
"""

from __future__ import annotations

from typing import Any

from resolvelib import Resolver
from resolvelib.resolvers.resolution import Resolution, _build_result

__all__ = ["PinMemoResolver"]


class _PinMemoResolution(Resolution):  # type: ignore[type-arg]
    def __init__(self, provider: Any, reporter: Any) -> None:
        super().__init__(provider, reporter)
        # (id(criterion), id(pin)) -> (both, kept alive so the ids stay
        # theirs; the answer)
        self._pin_checks: dict[tuple[int, int], tuple[Any, Any, bool]] = {}
        self._by_criterion = bool(
            getattr(provider, "preference_reads_only_requirements", False))
        # (name, id(criterion)) -> (the criterion, kept alive; the preference)
        self._preferences: dict[tuple[Any, int], tuple[Any, Any]] = {}

    def _is_current_pin_satisfying(self, name: Any, criterion: Any) -> bool:
        pin = self.state.mapping.get(name)
        if pin is None:
            return False
        key = (id(criterion), id(pin))
        found = self._pin_checks.get(key)
        if found is None or found[0] is not criterion or found[1] is not pin:
            satisfied = all(self._p.is_satisfied_by(requirement=r, candidate=pin)
                            for r in criterion.iter_requirement())
            found = self._pin_checks[key] = (criterion, pin, satisfied)
        return found[2]

    def _get_preference(self, name: Any) -> Any:
        if not self._by_criterion:
            return super()._get_preference(name)
        criterion = self.state.criteria[name]
        key = (name, id(criterion))
        found = self._preferences.get(key)
        if found is None or found[0] is not criterion:
            found = self._preferences[key] = (criterion,
                                              super()._get_preference(name))
        return found[1]


class PinMemoResolver(Resolver):  # type: ignore[type-arg]
    """:class:`resolvelib.Resolver` whose rounds answer the pin check once per
    (criterion, pin); see the module docstring."""

    def resolve(  # type: ignore[override]  # as resolvelib.Resolver does
        self, requirements: Any, max_rounds: int = 100
    ) -> Any:
        resolution = _PinMemoResolution(self.provider, self.reporter)
        state = resolution.resolve(requirements, max_rounds=max_rounds)
        return _build_result(state)
