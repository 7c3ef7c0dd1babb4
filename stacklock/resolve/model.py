"""What the resolver works on: requirements and candidates.

A *requirement* is one dependency edge after the profile's rules were applied
(markers evaluated for the target, overrides substituted); a *candidate* is one
version of one project, with the wheels of that version that fit the target. As
in pip, ``name[extra]`` is its own identifier whose candidate depends on the plain
``name`` at the same version, so extras never pull a second version in.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from packaging.markers import Marker
    from packaging.requirements import Requirement as PepRequirement
    from packaging.version import Version

__all__ = [
    "Candidate",
    "Requirement",
    "holds_on",
    "iter_dependencies",
    "make_identifier",
    "parse_identifier",
]

_CUDA_LABEL = re.compile(r"^cu(\d+)(\d)$")


def make_identifier(name: str, extras: Iterable[str] = ()) -> str:
    """``torch`` or ``sglang[diffusion,tracing]``: one resolver identifier."""
    norm = canonicalize_name(name)
    ordered = sorted({canonicalize_name(e) for e in extras})
    return f"{norm}[{','.join(ordered)}]" if ordered else norm


@functools.cache  # asked on every round; a resolution has a few hundred identifiers
def parse_identifier(identifier: str) -> tuple[NormalizedName, frozenset[str]]:
    name, _, rest = identifier.partition("[")
    extras = frozenset(e for e in rest.rstrip("]").split(",") if e)
    return canonicalize_name(name), extras


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """One requirement edge. ``parent`` names who asked ("sglang 0.5.9", or None for
    the profile); ``text`` is the requirement as it was written there and
    ``overridden`` the original text when an override replaced it."""

    name: NormalizedName
    extras: frozenset[str] = frozenset()
    specifier: SpecifierSet = field(default_factory=SpecifierSet)
    text: str = ""
    parent: str | None = None
    overridden: str | None = None

    @functools.cached_property
    def identifier(self) -> str:
        # asked by resolvelib on every round for every requirement and candidate
        return make_identifier(self.name, self.extras)

    @functools.cached_property
    def _answers(self) -> dict[Version, bool]:
        return {}

    def is_satisfied_by(self, version: Version) -> bool:
        """Whether the specifier takes ``version``, pre-releases included (which
        are offered is decided when matching). resolvelib asks it for every pin
        on every round (~50,000 times for sglang), mostly again: remembered."""
        answers = self._answers
        found = answers.get(version)
        if found is None:
            found = answers[version] = self.specifier.contains(version,
                                                               prereleases=True)
        return found

    @functools.cached_property
    def is_pinned(self) -> bool:
        return any(s.operator in ("==", "===") and "*" not in s.version
                   for s in self.specifier)

    @functools.cached_property
    def specifier_text(self) -> str:
        """The specifier as text: all that decides which versions it takes."""
        return str(self.specifier)

    def describe(self) -> str:
        who = self.parent or "the profile"
        text = self.text or self.identifier
        if self.overridden:
            return f"{text} (an override of {who}'s {self.overridden})"
        return f"{text} (required by {who})"


@dataclass(frozen=True, kw_only=True, eq=False)
class Candidate:
    """One version of one project. ``files`` are the version's fitting links
    (a filename may repeat with other hashes), or a
    :class:`stacklock.index.versions.VersionFiles` that judges them when first
    asked: ``evaluations`` (empty when none is compatible after all). ``best``
    is the wheel the lock records: the most preferred tag, then the highest
    build tag. A direct reference of the profile is a candidate with no files
    and its ``direct`` (a :class:`stacklock.resolve.direct.DirectArtifact`)."""

    name: NormalizedName
    version: Version
    extras: frozenset[str] = frozenset()
    files: Any = ()  # tuple of stacklock.index.finder.Evaluation, or VersionFiles
    index: str = ""
    direct: Any = None

    @property
    def usable(self) -> bool:
        """Whether the resolver may take it: a direct reference, or a version
        with a compatible file (judged now, when not yet)."""
        return self.direct is not None or bool(self.evaluations)

    @functools.cached_property
    def evaluations(self) -> tuple[Any, ...]:
        files = self.files
        return files if isinstance(files, tuple) else files.judge()

    @functools.cached_property
    def identifier(self) -> str:
        return make_identifier(self.name, self.extras)

    @functools.cached_property
    def best(self) -> Any:
        return min(self.evaluations, key=_wheel_rank)

    @functools.cached_property
    def key(self) -> tuple[str, Version]:
        return (self.identifier, self.version)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Candidate) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"{self.identifier} {self.version}"

    def with_extras(self, extras: frozenset[str]) -> Candidate:
        return Candidate(name=self.name, version=self.version, extras=extras,
                         files=self.files, index=self.index, direct=self.direct)

    @property
    def cuda(self) -> str | None:
        """The CUDA a wheel targets when its local label says so (``+cu130``)."""
        local = self.version.local or ""
        for part in local.split("."):
            m = _CUDA_LABEL.match(part)
            if m:
                return f"{m.group(1)}.{m.group(2)}"
        return None


def _wheel_rank(evaluation: Any) -> tuple[int, tuple[Any, ...], str, str]:
    rank = evaluation.tag_rank if evaluation.tag_rank is not None else 1 << 30
    build = tuple(evaluation.build or ())
    # Higher build tags win; negate numerically where possible, keep the order
    # total (filename, then hash) so the choice never depends on page order.
    neg_build = tuple(-b if isinstance(b, int) else 0 for b in build)
    return (rank, neg_build, evaluation.link.filename, evaluation.link.sha256 or "")


def iter_dependencies(
    requires_dist: Sequence[PepRequirement],
    extras: frozenset[str],
    environment: dict[str, str],
) -> Iterable[PepRequirement]:
    """The requirements that apply on the target: markers evaluated with ``extra``
    set to "" for the base package and to each requested extra otherwise."""
    wanted = sorted(extras) if extras else [""]
    for req in requires_dist:
        if req.marker is None:
            if not extras:
                yield req
            continue
        if any(_evaluate(req.marker, environment, e) for e in wanted):
            if extras and _evaluate(req.marker, environment, ""):
                continue  # a base dependency; the base candidate brings it
            yield req


def holds_on(req: PepRequirement, environment: Mapping[str, str]) -> bool:
    """Whether the marker of a profile's requirement, override or constraint
    holds on the target (no marker: always)."""
    return req.marker is None or req.marker.evaluate({**environment, "extra": ""})


def _evaluate(marker: Marker, environment: dict[str, str], extra: str) -> bool:
    return marker.evaluate({**environment, "extra": extra})
