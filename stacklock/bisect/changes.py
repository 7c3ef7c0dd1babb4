"""The candidate changes between two locks and the groups they travel in.

A change is one package that the semantic diff says moved (added, removed,
upgraded, downgraded, rebuilt, ...) or the toolkit. Changes are grouped from
the packages' own requirements, never from a list of names: applying change A
*needs* change B when A's BAD requirements reject B's GOOD version (or B is
added), or when B's BAD version (or its removal) breaks a requirement of A's
GOOD version. Changes that need each other both ways, and those tied by an
exact pin (torch pinning ``nvidia-*``, torchvision pinning torch, whichever
way the need points), form one group: the strongly connected parts of the
*needs* graph with pins counted both ways. Needs between groups stay as edges: the
search tests a set of groups together with everything it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from packaging.requirements import Requirement
    from packaging.version import Version

__all__ = [
    "TOOLKIT",
    "Change",
    "ChangeGraph",
    "Group",
    "Need",
    "group_changes",
    "is_pin",
    "violates",
]

TOOLKIT = "[toolkit]"  # the toolkit's change: not a project name, so no clash


@dataclass(frozen=True, kw_only=True)
class Change:
    """One candidate change: ``name`` (canonical) moved from ``old`` to ``new``
    (None where absent); ``kind`` as ``stacklock diff`` names it."""

    name: str
    kind: str
    old: str | None
    new: str | None

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "change": self.kind.replace("-", "_"),
                "old": self.old,
                "new": self.new}

    def __str__(self) -> str:
        return f"{self.name} {self.old or '(absent)'} -> {self.new or '(absent)'}"


@dataclass(frozen=True, kw_only=True)
class Need:
    """Applying ``source``'s change needs ``target``'s: ``why`` says which
    requirement (``torchvision 0.24.0 requires torch==2.9.0``)."""

    source: str
    target: str
    why: str
    pin: bool = False  # an exact pin (``==`` one version): inseparable both ways


@dataclass(frozen=True, kw_only=True)
class Group:
    """Changes that cannot be separated, with the requirements that tie them."""

    changes: tuple[Change, ...]
    ties: tuple[str, ...] = ()

    @property
    def names(self) -> frozenset[str]:
        return frozenset(c.name for c in self.changes)

    @property
    def label(self) -> str:
        return " + ".join(c.name for c in self.changes)

    def to_dict(self) -> dict[str, object]:
        return {"changes": [c.to_dict() for c in self.changes],
                "ties": list(self.ties)}


class ChangeGraph:
    """The groups in search order (what a group needs comes before it) and the
    needs between them (``needs[i]``: the groups group ``i`` needs). A need
    the groups could not see (through an extra) is learnt when a mix shows it."""

    def __init__(self, groups: Sequence[Group], needs: Sequence[Iterable[int]]
                 ) -> None:
        self.groups = tuple(groups)
        self.needs = [frozenset(n) for n in needs]
        self._of = {name: i for i, g in enumerate(self.groups) for name in g.names}

    def group_of(self, name: str) -> int | None:
        return self._of.get(name)

    def learn(self, source: int, target: int) -> bool:
        """Group ``source`` needs group ``target``; False if known already."""
        if source == target or target in self.needs[source]:
            return False
        self.needs[source] |= {target}
        return True

    def up(self, chosen: Iterable[int]) -> frozenset[int]:
        """``chosen`` with everything it needs, transitively."""
        out: set[int] = set()
        todo = list(chosen)
        while todo:
            i = todo.pop()
            if i not in out:
                out.add(i)
                todo.extend(self.needs[i])
        return frozenset(out)

    def down(self, chosen: Iterable[int]) -> frozenset[int]:
        """``chosen`` with every group that needs one of them, transitively:
        what must be reverted with them."""
        out = set(chosen)
        grew = True
        while grew:
            more = {i for i, n in enumerate(self.needs) if i not in out and n & out}
            out |= more
            grew = bool(more)
        return frozenset(out)

    def names(self, chosen: Iterable[int]) -> frozenset[str]:
        return frozenset(n for i in chosen for n in self.groups[i].names)


def is_pin(requirement: Requirement) -> bool:
    """One release and no other: ``===X``, ``==X``, or ``==X.Y.Z.*`` (a whole
    release, any of its post or local builds: how ``cuda-toolkit`` pins its
    ``nvidia-*`` wheels); ``==2.*`` is a range."""
    specs = list(requirement.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "==="):
        return False
    version = specs[0].version
    return not version.endswith(".*") or version.count(".") >= 3


def violates(requirement: Requirement, version: Version | None) -> bool:
    """Whether a package at ``version`` (None: absent) breaks ``requirement``."""
    if version is None:
        return True
    return not requirement.specifier.contains(version, prereleases=True)


def group_changes(
    changes: Sequence[Change],
    *,
    good: Mapping[str, Version | None],
    bad: Mapping[str, Version | None],
    requirements: Callable[[str, str, frozenset[str]], Sequence[Requirement]],
) -> ChangeGraph:
    """Group ``changes`` by what their requirements need of each other.

    ``good``/``bad`` map each changed name to its version at that end (None:
    absent); ``requirements(name, end, extras)`` gives the requirements of
    ``name`` at ``end`` ("good" or "bad") with ``extras`` asked of it, that
    apply on the target. The extras a changed package asks of another at one
    end are followed: torch 2.11 asks ``cuda-toolkit[cublas]``, whose extra
    pins ``nvidia-cublas``.
    """
    changed = {c.name for c in changes} - {TOOLKIT}
    ends = {"good": good, "bad": bad}
    asked: dict[tuple[str, str], set[str]] = {}
    for end, versions in ends.items():
        for name in sorted(changed):
            if versions.get(name) is None:
                continue
            for req in requirements(name, end, frozenset()):
                other = canonicalize_name(req.name)
                if other in changed and req.extras:
                    asked.setdefault((other, end), set()).update(req.extras)

    def read(name: str, end: str) -> Sequence[Requirement]:
        return requirements(name, end, frozenset(asked.get((name, end), ())))

    needs: list[Need] = []
    for name in sorted(changed):
        needs += _needs_of(name, changed, good, bad, read)
    return _condense(changes, needs)


def _needs_of(
    name: str,
    changed: set[str],
    good: Mapping[str, Version | None],
    bad: Mapping[str, Version | None],
    requirements: Callable[[str, str], Sequence[Requirement]],
) -> list[Need]:
    out = []
    # name at BAD with the other still at GOOD, then name at GOOD with the
    # other already at BAD
    for end, mine, theirs in (("bad", bad, good), ("good", good, bad)):
        if mine.get(name) is None:
            continue
        for req in requirements(name, end):
            other = canonicalize_name(req.name)
            if other in changed and other != name and violates(req, theirs.get(other)):
                source, target = (name, other) if end == "bad" else (other, name)
                out.append(Need(source=source, target=target, pin=is_pin(req),
                                why=f"{name} {mine[name]} requires {req}"))
    return out


def _condense(changes: Sequence[Change], needs: Sequence[Need]) -> ChangeGraph:
    """Strongly connected parts of the needs graph (Tarjan), ordered so that
    a group comes after what it needs, ties broken by name."""
    names = sorted(c.name for c in changes)
    edges: dict[str, set[str]] = {n: set() for n in names}
    tied = {n: set(e) for n, e in edges.items()}
    for need in needs:
        edges[need.source].add(need.target)
        tied[need.source].add(need.target)
        if need.pin:
            tied[need.target].add(need.source)
    parts = _strong_parts(names, tied)
    part_of = {n: i for i, part in enumerate(parts) for n in part}
    by_name = {c.name: c for c in changes}
    order = _topological(parts, edges, part_of)
    index = {old: new for new, old in enumerate(order)}
    groups = []
    deps = []
    for old in order:
        part = parts[old]
        ties = sorted({n.why for n in needs
                       if n.source in part and n.target in part})
        groups.append(Group(changes=tuple(by_name[n] for n in sorted(part)),
                            ties=tuple(ties)))
        deps.append(frozenset(index[part_of[t]] for n in part for t in edges[n]
                              if part_of[t] != old))
    return ChangeGraph(groups, deps)


def _strong_parts(names: Sequence[str], edges: Mapping[str, set[str]]
                  ) -> list[frozenset[str]]:
    """Tarjan's algorithm, iterative (a stack of hundreds of nvidia wheels)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[frozenset[str]] = []
    for root in names:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.add(top)
                    if top == node:
                        break
                parts.append(frozenset(part))
    return parts


def _topological(parts: Sequence[frozenset[str]], edges: Mapping[str, set[str]],
                 part_of: Mapping[str, int]) -> list[int]:
    """Parts ordered so that what a part needs comes first; among the parts
    ready at once, by their first name."""
    deps = [{part_of[t] for n in part for t in edges[n]} - {i}
            for i, part in enumerate(parts)]
    done: list[int] = []
    placed: set[int] = set()
    while len(done) < len(parts):
        ready = [i for i in range(len(parts))
                 if i not in placed and deps[i] <= placed]
        first = min(ready, key=lambda i: min(parts[i]))
        done.append(first)
        placed.add(first)
    return done
