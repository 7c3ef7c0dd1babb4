"""The profile's policy on requirements: overrides, constraints, pre-releases.

An *override* replaces every requirement on its name, wherever it is written (a
dependency's METADATA or the profile itself), as uv's ``--override`` does; it adds
no requirement of its own. A *constraint* only narrows the versions of a project
that something else requires. Overrides and constraints whose markers do not hold
on the target are ignored. Every replacement is recorded, so the lock can say
which package's requirement was changed, from what, to what.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.errors import ProfileError, ResolutionError
from stacklock.lock.tables import AppliedOverride
from stacklock.resolve.model import Requirement, holds_on
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from packaging.requirements import Requirement as PepRequirement

    from stacklock.resolve.direct import DirectRef
    from stacklock.resolve.model import Candidate

__all__ = ["AppliedOverride", "Rules", "requirement_text", "yanked_pins"]


def requirement_text(req: PepRequirement) -> str:
    """``name[extras]specifier`` (or ``name[extras] @ URL``, credentials
    redacted) without the marker (already evaluated)."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    if req.url:
        return f"{req.name}{extras} @ {redact_url(req.url)}"
    return f"{req.name}{extras}{req.specifier}"


def yanked_pins(requirements: Iterable[PepRequirement], environment: Mapping[str, str]
                ) -> dict[NormalizedName, frozenset[Version]]:
    """The versions the profile's own requirements, constraints and overrides
    pin with ``==`` or ``===`` (markers holding on the target): PEP 592 lets
    their yanked files be used, as uv does. A dependency's pin never does."""
    found: dict[NormalizedName, set[Version]] = {}
    for req in requirements:
        specs = list(req.specifier)
        if len(specs) != 1 or req.url or not holds_on(req, environment):
            continue
        spec = specs[0]
        if spec.operator == "===" or (spec.operator == "==" and
                                      not spec.version.endswith(".*")):
            try:
                version = Version(spec.version)
            except InvalidVersion:
                continue
            found.setdefault(canonicalize_name(req.name), set()).add(version)
    return {name: frozenset(v) for name, v in found.items()}


class Rules:
    def __init__(
        self,
        *,
        environment: Mapping[str, str],
        overrides: Iterable[PepRequirement] = (),
        constraints: Iterable[PepRequirement] = (),
        prereleases: frozenset[NormalizedName] = frozenset(),
        direct: Mapping[NormalizedName, DirectRef] | None = None,
    ) -> None:
        self.environment = dict(environment)
        self.direct = dict(direct or {})
        self.overrides: dict[NormalizedName, PepRequirement] = {
            canonicalize_name(r.name): r for r in overrides
            if holds_on(r, self.environment)
        }
        self._constraints: dict[NormalizedName, SpecifierSet] = {}
        for r in constraints:
            if holds_on(r, self.environment):
                name = canonicalize_name(r.name)
                self._constraints[name] = (
                    self._constraints.get(name, SpecifierSet()) & r.specifier)
        self.prereleases = prereleases
        self._applied: dict[tuple[str | None, str], AppliedOverride] = {}
        self._lock = threading.Lock()

    @property
    def override_specifiers(self) -> dict[NormalizedName, SpecifierSet]:
        return {name: r.specifier for name, r in self.overrides.items()}

    def constraint_for(self, name: str) -> SpecifierSet:
        return self._constraints.get(canonicalize_name(name), SpecifierSet())

    def allows_prerelease(self, name: str, reqs: Sequence[Requirement]) -> bool:
        return canonicalize_name(name) in self.prereleases or any(
            r.specifier.prereleases for r in reqs)

    def make(self, req: PepRequirement, *, parent: Candidate | None) -> Requirement:
        """The resolver's requirement for ``req``, with the override applied."""
        name = canonicalize_name(req.name)
        who = f"{parent.name} {parent.version}" if parent is not None else None
        override = self.overrides.get(name)
        if override is None and req.url and parent is not None:
            self._check_direct(req, who or "")
        if override is None:
            return Requirement(name=name, extras=_extras(req.extras),
                               specifier=req.specifier, text=requirement_text(req),
                               parent=who)
        changed = (_extras(req.extras) != _extras(override.extras)
                   or req.specifier != override.specifier)
        if changed:
            applied = AppliedOverride(package=parent.name if parent else None,
                                      original=requirement_text(req),
                                      override=requirement_text(override))
            with self._lock:
                self._applied[(who, applied.original)] = applied
        return Requirement(
            name=name, extras=_extras(override.extras), specifier=override.specifier,
            text=requirement_text(override), parent=who,
            overridden=requirement_text(req) if changed else None)

    def _check_direct(self, req: PepRequirement, who: str) -> None:
        """A dependency's direct reference is locked only where the profile
        names the same one (then the profile's is the candidate)."""
        from stacklock.resolve.direct import parse_direct

        name = canonicalize_name(req.name)
        ref = self.direct.get(name)
        text = requirement_text(req)
        if ref is None:
            raise ResolutionError(
                f"{who} requires {text}: a direct reference in a dependency's "
                "metadata, which stacklock locks only when the profile names it",
                hint=f"add {text} to [requirements] packages, or override "
                f"{req.name} with a version from an index")
        try:
            same = parse_direct(req, base=Path.cwd()).same_as_key == ref.same_as_key
        except ProfileError:
            same = False
        if not same:
            raise ResolutionError(
                f"{who} requires {text}, but the profile names {ref.text}",
                hint=f"point the profile's {req.name} at the same reference, or "
                f"override {req.name}")

    def applied(self, chosen: Iterable[Candidate]) -> list[AppliedOverride]:
        """The replacements made for the profile and the chosen candidates only
        (a candidate the resolver tried and dropped does not count)."""
        keep: set[str | None] = {None}
        keep |= {f"{c.name} {c.version}" for c in chosen}
        with self._lock:
            found = [a for (who, _), a in self._applied.items() if who in keep]
        unique = {(a.package or "", a.original, a.override): a for a in found}
        return [unique[k] for k in sorted(unique)]


def _extras(extras: Iterable[str]) -> frozenset[str]:
    return frozenset(canonicalize_name(e) for e in extras)
