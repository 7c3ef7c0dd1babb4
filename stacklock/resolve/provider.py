"""The resolvelib provider: thin glue between resolvelib and the package source.

As in pip's ``provider.py``, each method is a few lines. Requirements know what
they allow (``specifier``), candidates know where they come from, the source does
the I/O and the rules (overrides, constraints, pre-releases) do the policy:

- ``identify``: ``name`` or ``name[extras]``; an extras candidate depends on the
  base project at its own version, so both always agree.
- ``get_preference``: decide the most constrained project first: pinned or
  overridden ones, then those with the fewest matching candidates (versions
  with a file that can fit, counted without judging the files), then the
  profile's own requirements, then by name (stable, so results never depend on
  dict order).
- ``find_matches``: newest first, every requirement and constraint satisfied,
  pre-releases only where the profile allows them or a requirement names one
  (or the project has nothing else, as uv does); lazily, so only the versions
  resolvelib gets to have their files judged
  (:mod:`stacklock.index.versions`).
- ``get_dependencies``: the candidate's METADATA, markers evaluated for the target,
  overrides substituted; newly seen projects are handed to prefetch.

When the resolver rejects a candidate it tries the next one offered, and each
try needs that candidate's METADATA: one request after another, with the
resolver waiting on each. :meth:`StackProvider.prefetch_after` (called by the
reporter on every rejection) starts reading the METADATA of the next
:data:`READ_AHEAD` in the background, so a run of rejections (torchvision going
back release by release to the one that takes the pinned torch) waits on the
network about once in four. More would read METADATA for releases a short run
never reaches.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet
from resolvelib import AbstractProvider

from stacklock.resolve.learned import Learned
from stacklock.resolve.model import (
    Candidate,
    Requirement,
    parse_identifier,
)
from stacklock.resolve.preferences import Preferences, locked_first

if TYPE_CHECKING:
    from collections.abc import (
        Callable,
        Collection,
        Iterable,
        Iterator,
        Mapping,
        Sequence,
    )

    from packaging.version import Version
    from resolvelib.structs import RequirementInformation

    from stacklock.resolve.rules import Rules
    from stacklock.resolve.source import PackageSource

__all__ = ["MAX_RESTARTS", "READ_AHEAD", "Restart", "StackProvider"]

READ_AHEAD = 4  # candidates whose METADATA a rejection starts reading
MAX_RESTARTS = 8  # fresh starts with what was learned, in one resolution


class Restart(Exception):
    """Resolve again from the start: with what was learned (``learn``), since
    a pin was made before a fact that rules it out; or without, since a
    pre-release was offered that a learned range assumed would not be
    (:class:`stacklock.resolve.learned.Learned`)."""

    def __init__(self, *, learn: bool) -> None:
        super().__init__("restart" if learn else "restart without learning")
        self.learn = learn


class StackProvider(AbstractProvider):  # type: ignore[type-arg]
    def __init__(self, source: PackageSource, rules: Rules,
                 excluded: Collection[tuple[str, Version]] = (),
                 preferences: Preferences | None = None,
                 roots: Iterable[Requirement] = ()) -> None:
        self.source = source
        self.rules = rules
        # (name, version) the native check found would not load: never offered
        self.excluded = frozenset(excluded)
        self.preferences = preferences or Preferences()
        # what the conflicts taught (dead candidates, derived ranges)
        self._roots = tuple(roots)
        self.learned = Learned(self._roots, versions=self._versions,
                               constraint=rules.constraint_for)
        self._learn = True
        self._unsettled = False  # a fact learned since the last look at the pins
        self.restarts = 0
        self._last_rejected: str | None = None
        # (name, the requirements' specifiers) -> the candidates that match
        self._matches: dict[tuple[str, tuple[str, ...]], list[Candidate]] = {}
        # identifier -> the candidates last offered for it (prefetch_after)
        self._offered: dict[str, list[Candidate]] = {}
        # (identifier, ids of the requirements on it) -> (those requirements,
        # kept alive so the ids stay theirs; the preference)
        self._preferences: dict[tuple[Any, ...],
                                tuple[tuple[Requirement, ...], Any]] = {}

    def identify(self, requirement_or_candidate: Requirement | Candidate) -> str:
        return requirement_or_candidate.identifier

    def get_preference(
        self,
        identifier: str,
        resolutions: Mapping[str, Candidate],
        candidates: Mapping[str, Iterator[Candidate]],
        information: Mapping[str, Iterator[RequirementInformation[Any, Any]]],
        backtrack_causes: Sequence[RequirementInformation[Any, Any]],
    ) -> Any:
        # resolvelib asks again for each unpinned project on every round (~7,000
        # times for sglang), mostly with the same requirements: remembered per
        # set of requirement objects. Equal requirements give equal answers, so
        # a tuple that compares equal is as good as the same objects.
        reqs = tuple(info.requirement for info in information[identifier])
        key = (identifier, *map(id, reqs))
        found = self._preferences.get(key)
        if found is None or found[0] != reqs:
            found = self._preferences[key] = (reqs, self._preference(identifier, reqs))
        return found[1]

    def narrow_requirement_selection(
        self,
        identifiers: Iterable[str],
        resolutions: Mapping[str, Candidate],
        candidates: Mapping[str, Iterator[Candidate]],
        information: Mapping[str, Iterator[RequirementInformation[Any, Any]]],
        backtrack_causes: Sequence[RequirementInformation[Any, Any]],
    ) -> Iterable[str]:
        """After a conflict, work on the projects that caused it first (pip)."""
        wanted = list(identifiers)
        causes = {c.requirement.identifier for c in backtrack_causes}
        causes |= {c.parent.identifier for c in backtrack_causes if c.parent}
        narrowed = [i for i in wanted if i in causes]
        return narrowed or wanted

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[Requirement]],
        incompatibilities: Mapping[str, Iterator[Candidate]],
    ) -> Callable[[], Iterator[Candidate]]:
        name, extras = parse_identifier(identifier)
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        found = [c for c in self._matching(name, reqs) if c.version not in bad]
        if name in self.learned.assumed_final and any(
                c.version.is_prerelease for c in found):
            raise Restart(learn=False)
        found = locked_first(found, self.preferences.version_of(name))
        offered = [c.with_extras(extras) for c in found] if extras else found
        offered = [c for c in offered if not self.learned.is_dead(c)]
        self._offered[identifier] = offered

        def newest_first() -> Iterator[Candidate]:
            # a version's files are judged when resolvelib gets to it; one
            # with no compatible file after all is passed over
            return (c for c in offered if c.usable)

        return newest_first

    def is_satisfied_by(self, requirement: Requirement, candidate: Candidate) -> bool:
        return requirement.is_satisfied_by(candidate.version)

    def get_dependencies(self, candidate: Candidate) -> list[Requirement]:
        known = self.learned.dependencies.get(candidate.key)
        if known is not None:
            return known
        meta = self.source.metadata(candidate)
        deps = self.source.dependencies(meta, candidate.extras)
        self.source.prefetch(deps)
        out = [self.rules.make(r, parent=candidate) for r in deps]
        if candidate.extras:
            out.append(Requirement(
                name=candidate.name, specifier=SpecifierSet(f"=={candidate.version}"),
                text=f"{candidate.name}=={candidate.version}",
                parent=f"{candidate.identifier} {candidate.version}"))
        self.learned.dependencies[candidate.key] = out
        return out

    def rejected(self, candidate: Candidate, criterion: Any) -> None:
        """resolvelib rejected ``candidate`` over ``criterion``: learn whether
        it can never be taken (:mod:`stacklock.resolve.learned`)."""
        self._last_rejected = candidate.identifier
        if not self._learn:
            return
        own = [i.requirement for i in criterion.information
               if i.parent is not None and i.parent.key == candidate.key]
        self.learned.rejected(candidate, own)

    def conflict(self) -> None:
        """Every candidate of the project last rejected failed: learn the
        ranges that follows for the projects all of them require."""
        if self._learn and self._last_rejected is not None and self.learned.exhausted(
                self._last_rejected, self._matching):
            self._matches.clear()
            self._preferences.clear()
            self._unsettled = True

    def ending_round(self, pinned: Iterable[Candidate]) -> None:
        """After a round that learned a range: start afresh when one of the
        ``pinned`` candidates contradicts it (:meth:`Learned.contradicts`)."""
        if self._unsettled and self.restarts < MAX_RESTARTS:
            self._unsettled = False
            if self.learned.contradicts(pinned):
                self.restarts += 1
                raise Restart(learn=True)

    def forget(self) -> None:
        """Drop what was learned and learn nothing more (:class:`Restart`)."""
        self._learn = False
        self.learned = Learned(self._roots, versions=self._versions,
                               constraint=self.rules.constraint_for)
        self._matches.clear()
        self._preferences.clear()

    def prefetch_after(self, candidate: Candidate) -> None:
        """``candidate`` was rejected: read ahead the METADATA of the candidates
        offered after it (see the module docstring)."""
        offered = self._offered.get(candidate.identifier, [])
        at = next((i for i, c in enumerate(offered) if c.key == candidate.key), None)
        if at is not None:
            after = (c for c in offered[at + 1:] if c.usable)
            self.source.prefetch_metadata(list(itertools.islice(after, READ_AHEAD)))

    # -- helpers --------------------------------------------------------------------

    def _preference(self, identifier: str, reqs: Sequence[Requirement]) -> Any:
        name, extras = parse_identifier(identifier)
        pinned = any(r.is_pinned for r in reqs) or name in self.rules.overrides
        direct = any(r.parent is None for r in reqs)
        return (not pinned, bool(extras), len(self._matching(name, reqs)),
                not direct, identifier)

    def _matching(self, name: str, reqs: Sequence[Requirement]) -> list[Candidate]:
        """The candidates every one of ``reqs`` allows, remembered per set of
        specifiers (get_preference and find_matches ask the same again and
        again; the text of a SpecifierSet says all that decides the answer)."""
        key = (name, tuple(sorted(r.specifier_text for r in reqs)))
        found = self._matches.get(key)
        if found is None:
            found = self._matches[key] = self._match(name, reqs)
        return found

    def _versions(self, name: str) -> list[Candidate]:
        """Every candidate of ``name`` but those the native check excluded."""
        return [c for c in self.source.candidates(name)
                if (name, c.version) not in self.excluded]

    def _match(self, name: str, reqs: Sequence[Requirement]) -> list[Candidate]:
        spec = SpecifierSet()
        for r in reqs:
            spec &= r.specifier
        spec &= self.rules.constraint_for(name)
        allow = self.rules.allows_prerelease(name, reqs)
        found = self._versions(name)
        matching = [c for c in found if spec.contains(c.version, prereleases=allow)]
        if not matching and not allow and not any(
                not c.version.is_prerelease and c.usable for c in found):
            # Only pre-releases exist: take them, as pip and uv do.
            matching = [c for c in found if spec.contains(c.version, prereleases=True)]
        if name in self.learned.ranges:
            matching = [c for c in matching if self.learned.allows(name, c.version)]
        return matching
