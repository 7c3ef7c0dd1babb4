"""What a resolution learns from its conflicts that holds for every answer.

resolvelib backtracks chronologically: when every version of a project fails,
it goes back to the project pinned last among those in the conflict and tries
its next version, forgetting why the others failed. Where the failure does not
depend on that project at all, it tries every one of its versions, and every
version of the failing project again after each (a Django application's
requirements: each of ~100 google-cloud-bigtable versions, then each of ~50
google-cloud-spanner versions again, 5,000 rounds without an answer). uv's
PubGrub learns instead. Two such facts are learned here, each true of every
answer, so neither can lose one:

- a *dead* candidate: one of its requirements leaves no version of its project
  that the profile's own requirements (and constraints) also allow
  (google-cloud-spanner 3.71.0 needs sqlparse>=0.4.4, the profile asks for
  sqlparse<=0.3.0). It is never offered again.
- a *derived range*: a project the profile requires is in every answer, so
  when each of its versions still alive requires project P, P's version is
  one that at least one of those requirements allows (every spanner that takes
  sqlparse<=0.3.0 needs protobuf<5). Only those versions of P are offered
  from then on, so each version of a package requiring protobuf>=6 fails
  where it is pinned, without backtracking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stacklock.resolve.model import parse_identifier

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from packaging.utils import NormalizedName
    from packaging.version import Version

    from stacklock.resolve.model import Candidate, Requirement

__all__ = ["Learned"]


class Learned:
    """The dead candidates and derived ranges of one resolution.

    ``roots`` are the profile's requirements (no parent); ``versions(name)``
    gives every candidate of a project the resolution may take at all (the
    native check's exclusions left out), ``constraint(name)`` the profile's
    constraint. Versions are compared pre-releases included: a fact learned
    from fewer versions than an answer may use would not be true of it. The
    one exception is the versions of the project a range is derived from: its
    live versions are the ones offered (:meth:`exhausted`), pre-releases
    only where they are offered; ``assumed_final`` names those projects, and a
    resolution that comes to offer one of their pre-releases starts again
    without what it learned (``StackProvider.find_matches``)."""

    def __init__(self, roots: Iterable[Requirement],
                 versions: Callable[[NormalizedName], Sequence[Candidate]],
                 constraint: Callable[[NormalizedName], Any]) -> None:
        self.roots: dict[NormalizedName, list[Requirement]] = {}
        for req in roots:
            self.roots.setdefault(req.name, []).append(req)
        self._versions = versions
        self._constraint = constraint
        self.dead: set[tuple[str, Version]] = set()
        # project -> the versions every answer's version of it is among
        self.ranges: dict[str, frozenset[Version]] = {}
        self.assumed_final: set[NormalizedName] = set()
        # candidate key -> its requirements (as get_dependencies gave them)
        self.dependencies: dict[tuple[str, Version], list[Requirement]] = {}

    def is_dead(self, candidate: Candidate) -> bool:
        return candidate.key in self.dead or \
            (candidate.name, candidate.version) in self.dead

    def allows(self, name: str, version: Version) -> bool:
        versions = self.ranges.get(name)
        return versions is None or version in versions

    def rejected(self, candidate: Candidate,
                 requirements: Iterable[Requirement]) -> bool:
        """``candidate`` failed, ``requirements`` being its own on the project
        in conflict: it is dead when one of them leaves no version the
        profile's requirements and constraints also allow. Whether it was
        found so now."""
        if self.is_dead(candidate) or not self._dooms(requirements):
            return False
        self.dead.add(candidate.key)
        return True

    def contradicts(self, pinned: Iterable[Candidate]) -> bool:
        """Whether a candidate of ``pinned`` is outside its project's range, or
        requires what no version in range allows: resolvelib keeps a pin until
        a conflict reaches it, so a fact learned after it was pinned needs a
        fresh start to act on it."""
        return any(not self.allows(c.name, c.version) or self._dooms(
            self.dependencies.get(c.key, ())) for c in pinned)

    def _dooms(self, requirements: Iterable[Requirement]) -> bool:
        """Whether one of ``requirements`` leaves no version that the profile's
        requirements, its constraints and the learned ranges allow."""
        return any(not any(c.usable for c in self._allowed(
            req.name, [req, *self.roots.get(req.name, ())])) for req in requirements)

    def exhausted(self, identifier: str, match: Callable[
            [NormalizedName, Sequence[Requirement]], Sequence[Candidate]]) -> bool:
        """Every version of ``identifier`` failed: when the profile requires it
        (every answer has a version of it), narrow the range of each project
        that every live version of it requires (those ``match`` offers for the
        profile's requirements on it). Whether a range changed."""
        name, extras = parse_identifier(identifier)
        if extras or name not in self.roots:
            return False
        offered = match(name, self.roots[name])
        live = [c for c in offered if not self.is_dead(c) and c.usable]
        found = [self.dependencies.get(c.key) for c in live]
        if not live or any(d is None for d in found):
            return False  # one never tried: what it requires is not known
        deps = [d for d in found if d is not None]
        common = set.intersection(*({r.name for r in d} for d in deps))
        changed = False
        for project in sorted(common):
            allowed: set[Version] = set()
            for reqs in deps:
                allowed.update(c.version for c in self._allowed(
                    project, [r for r in reqs if r.name == project]))
            before = self.ranges.get(project)
            after = frozenset(allowed) if before is None else before & allowed
            if after != before:
                self.ranges[project] = after
                changed = True
        if changed and not any(c.version.is_prerelease for c in offered):
            self.assumed_final.add(name)
        return changed

    def _allowed(self, name: NormalizedName,
                 reqs: Sequence[Requirement]) -> list[Candidate]:
        """The candidates of ``name`` every one of ``reqs`` and the profile's
        constraint allow, pre-releases included, within its learned range."""
        constraint = self._constraint(name)
        return [c for c in self._versions(name) if self.allows(name, c.version)
                and constraint.contains(c.version, prereleases=True)
                and all(r.is_satisfied_by(c.version) for r in reqs)]
