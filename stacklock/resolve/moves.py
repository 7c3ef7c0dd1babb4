"""Moving the provider, not only the consumer, when a candidate set does not load.

A native finding joins two packages: the *consumer* whose object needs a soname
or symbols (torchao 0.15.0's ``_C.abi3.so`` needs ``libcudart.so.12``) and the
*counterpart* that ships another major of it or lacks the symbols
(nvidia-cuda-runtime 13.2.86, torch 2.15.0). Passing over the consumer is one
way out; moving what brought the counterpart is the other: torch back to a
release built for CUDA 12, with its ``nvidia-*`` pins. Neither is right by
itself: torchao==0.15.* has no other consumer to take, a pinned torch has no
other provider.

:func:`provider_move` turns a check's findings into exclusions that move the
provider. For a soname shipped in another major by a wheel whose own version
has that major (NVIDIA's wheels: ``nvidia-cuda-runtime 13.2.86`` ships
``libcudart.so.13``): every version of that project in that major, so the
resolver goes straight to a provider that brings the major needed instead of
one release at a time. For symbols of a family the counterpart owns
(``c10::``, ``at::``, ``aoti_*``), which provider release exports them is
written nowhere but in its libraries: :func:`newest_exporting` bisects the
counterpart's releases with a check of the consumer's wheel beside each one's
(two wheels, each read once per machine; torchtext 0.18.0 beside torch 2.14.1
... 2.3.0 finds 2.3.1 in 4 reads where a check per release ran out of tries),
and every release newer than the one found is excluded. A soname move comes
first: it changes the provider's whole CUDA line, and the symbols are judged
again beside the release it leads to. The lock names the provider the user
sees (the package that requires the counterpart, torch; for symbols the
counterpart itself) with the version passed over, why, and
(:func:`with_choice`) what was chosen. :func:`newness` orders alternatives the
way a resolver prefers them: the profile's own requirements as new as they can
be, counted in releases back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.resolve.result import PassedOver

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

    from packaging.utils import NormalizedName

    from stacklock.resolve.model import Candidate
    from stacklock.resolve.result import ResolvedPackage
    from stacklock.resolve.source import PackageSource

__all__ = ["MAX_PROBES", "Move", "SymbolNeed", "kept_from_lock", "newest_exporting",
           "newness", "provider_move", "symbol_needs", "with_choice"]

MAX_PROBES = 7  # provider releases checked beside a consumer, per move


@dataclass(frozen=True, kw_only=True)
class Move:
    """Versions to exclude so that the providers move, and the lock's entries
    for them (``PassedOver`` with ``moved`` set)."""

    excluded: frozenset[tuple[NormalizedName, Version]]
    passed: tuple[PassedOver, ...]


@dataclass(frozen=True, kw_only=True)
class SymbolNeed:
    """A consumer whose objects need symbols of a family its counterpart owns
    and that the counterpart's locked ``version`` does not export (``missing``,
    mangled): torchtext 0.18.0's ``c10::`` beside torch 2.15.0."""

    consumer: PassedOver
    provider: NormalizedName
    version: Version
    missing: frozenset[str]


def symbol_needs(rejected: Sequence[PassedOver],
                 chosen: Sequence[Candidate]) -> list[SymbolNeed]:
    """The symbol findings of ``rejected`` by consumer and counterpart, for
    consumers no soname moves a provider for (:func:`provider_move` first)."""
    versions = {c.name: c.version for c in chosen}
    out: list[SymbolNeed] = []
    for consumer in rejected:
        found = [(f, _counterpart(f, versions)) for f in consumer.findings]
        if any(c is not None and _moved_major(f, c[1]) is not None
               for f, c in found):
            continue  # its provider moves for a soname: judged again there
        missing: dict[NormalizedName, set[str]] = {}
        for finding, counterpart in found:
            if _kind(finding) == "symbol" and counterpart is not None \
                    and counterpart[0] != consumer.name:
                missing.setdefault(counterpart[0], set()).add(finding.missing)
        out.extend(SymbolNeed(consumer=consumer, provider=name,
                              version=versions[name], missing=frozenset(names))
                   for name, names in sorted(missing.items()))
    return out


def newest_exporting(versions: Sequence[Version],
                     lacks: Callable[[Version], frozenset[str] | None],
                     need: SymbolNeed) -> Version | None:
    """The newest of ``versions`` (the provider's releases newest first, all
    older than ``need.version``) whose ``lacks`` (the symbols a consumer
    needs that it does not export) is empty; None when none checked is, or
    ``lacks`` said None (no wheel to read) for all.

    A symbol is exported from the release that added it until one removes it,
    so the releases a consumer loads beside are a run of neighbours, and
    bisection finds the newest in about log2(n) checks (at most
    :data:`MAX_PROBES`). A release that fails is too new when every symbol it
    lacks is lacked by the newer releases checked too, and too old when it
    lacks one a newer release exports (one added since): the search goes on
    older or newer accordingly. Only a release seen to pass is returned."""
    order = list(versions)
    failed: dict[Version, frozenset[str]] = {need.version: need.missing}
    best: Version | None = None
    low, high, probes = 0, len(order) - 1, 0
    limit = min(MAX_PROBES, len(order).bit_length() + 1)
    while low <= high and probes < limit:
        middle = (low + high) // 2
        version = order[middle]
        lacking = lacks(version)
        if lacking is None:  # nothing to read: as if it were not there
            del order[middle]
            high -= 1
            continue
        probes += 1
        if not lacking:
            best, high = version, middle - 1
            continue
        failed[version] = lacking
        too_old = any(symbol not in missing for newer, missing in failed.items()
                      if newer > version for symbol in lacking)
        if too_old:
            high = middle - 1
        else:
            low = middle + 1
    return best


def provider_move(rejected: Sequence[PassedOver], chosen: Sequence[Candidate],
                  graph: Mapping[str, set[NormalizedName]],
                  source: PackageSource,
                  direct: Collection[NormalizedName] = (),
                  exporting: Mapping[tuple[NormalizedName, NormalizedName],
                                     Version] | None = None) -> Move | None:
    """The exclusions that move the counterparts of ``rejected``'s findings
    (see the module docstring); None when no finding is a soname the
    counterpart ships in the major of its own version, nor a symbol whose
    counterpart ``exporting`` names a release for. ``direct``: the profile's
    requirements, preferred as the provider named. ``exporting``: (consumer,
    counterpart) -> the newest counterpart release that exports what the
    consumer needs (:func:`newest_exporting`)."""
    versions = {c.name: c.version for c in chosen}
    excluded: set[tuple[NormalizedName, Version]] = set()
    passed: dict[NormalizedName, PassedOver] = {}
    for consumer in rejected:
        for finding in consumer.findings:
            counterpart = _counterpart(finding, versions)
            if counterpart is None or counterpart[0] == consumer.name:
                continue
            name, version = counterpart
            major = _moved_major(finding, version)
            newest = (exporting or {}).get((consumer.name, name))
            if major is not None:
                excluded.update((name, c.version) for c in source.candidates(name)
                                if c.version.major == major)
                shown = _provider_of(name, graph, versions, direct)
            elif newest is not None and _kind(finding) == "symbol":
                excluded.update((name, c.version) for c in source.candidates(name)
                                if c.version > newest)
                shown = name
            else:
                continue
            what = finding.demangled or finding.missing
            passed.setdefault(shown, PassedOver(
                name=shown, version=versions[shown], moved=True,
                reason=f"{consumer.name} {consumer.version} needs {what}",
                findings=(finding,)))
    if not excluded:
        return None
    return Move(excluded=frozenset(excluded), passed=tuple(passed.values()))


def with_choice(passed: Iterable[PassedOver],
                packages: Sequence[ResolvedPackage]) -> list[PassedOver]:
    """``passed`` with each moved provider's entry saying what was chosen
    instead: ``; chose torch 2.9.1 (CUDA 12.8)``."""
    by_name = {p.name: p for p in packages}
    out = []
    for entry in passed:
        now = by_name.get(entry.name) if entry.moved else None
        if now is not None and now.version != entry.version:
            cuda = f" (CUDA {now.cuda})" if now.cuda else ""
            entry = replace(entry, reason=f"{entry.reason}; chose {now.name} "
                            f"{now.version}{cuda}")
        out.append(entry)
    return out


def kept_from_lock(earlier: Iterable[Mapping[str, str]],
                   locked: Mapping[NormalizedName, Version],
                   packages: Sequence[ResolvedPackage],
                   passed: Sequence[PassedOver]) -> list[PassedOver]:
    """``passed`` and the entries of the existing lock's ``passed-over``
    (``earlier``; ``locked``: its pins) that still explain the new resolution:
    the package passed over is locked at the version the lock held, as is
    every locked package its reason names ("torchao 0.15.0", "torch
    2.10.0"), and it was not passed over again. A resolution that starts from
    the lock's pins tries those first and never meets what was passed over; a
    lock that stays put keeps saying why."""
    now = {p.name: p.version for p in packages}
    out = list(passed)
    seen = {(p.name, p.version) for p in passed}
    for entry in earlier:
        name = canonicalize_name(entry["package"])
        try:
            version = Version(entry["version"])
        except InvalidVersion:
            continue
        reason = entry["reason"]
        named = [n for n, v in locked.items() if _names(reason, n, v)]
        if (name, version) in seen or name not in locked or now.get(name) in (
                None, version) or any(now.get(n) != locked[n]
                                      for n in (name, *named)):
            continue
        out.append(PassedOver(name=name, version=version, reason=reason,
                              kept=True))
    return out


def _names(reason: str, name: str, version: Version) -> bool:
    """Whether ``reason`` names ``name version`` (a whole word each)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)} {re.escape(str(version))}"
                     r"(?![\w.])", reason) is not None


def newness(chosen: Sequence[Candidate], names: Sequence[NormalizedName],
            source: PackageSource) -> tuple[int, tuple[int, ...]]:
    """How far back from their newest versions the profile's requirements
    ``names`` are in ``chosen`` (releases with a fitting wheel, newest first):
    the total, then each in the profile's order. Smaller is newer."""
    versions = {c.name: c.version for c in chosen}
    back = []
    for name in names:
        found = [c.version for c in source.compatible(name)]
        version = versions.get(name)
        back.append(found.index(version) if version in found else len(found))
    return sum(back), tuple(back)


def _counterpart(finding: object, versions: Mapping[NormalizedName, Version]
                 ) -> tuple[NormalizedName, Version] | None:
    """The locked package a finding names on the other side, if locked."""
    text = getattr(finding, "counterpart", None)
    if not text:
        return None
    name = canonicalize_name(str(text).rsplit(" ", 1)[0])
    version = versions.get(name)
    return None if version is None else (name, version)


def _kind(finding: Any) -> str:
    return str(getattr(finding, "kind", ""))


def _moved_major(finding: object, version: Version) -> int | None:
    """The major to move away from: the one of the soname the counterpart
    ships, when its own version is of that major (nvidia-cuda-runtime 13.2.86
    and ``libcudart.so.13``); None for anything else."""
    has = getattr(finding, "counterpart_has", ())
    if _kind(finding) != "soname" or not has:
        return None
    major = _soname_major(has[0])
    return major if major == version.major else None


def _soname_major(soname: str) -> int | None:
    """13 for ``libcudart.so.13``; None without a number."""
    tail = soname.split(".so", 1)[1].lstrip(".").split(".")[0]
    try:
        return Version(tail).major if tail else None
    except InvalidVersion:
        return None


def _provider_of(name: NormalizedName, graph: Mapping[str, set[NormalizedName]],
                 versions: Mapping[NormalizedName, Version],
                 direct: Collection[NormalizedName]) -> NormalizedName:
    """The package a user sees as the provider of ``name``: among those that
    require it, directly or through others (torch, through cuda-toolkit, for
    nvidia-cuda-runtime), one the profile requires, else one nothing requires;
    itself when nothing requires it."""
    parents: dict[NormalizedName, list[NormalizedName]] = {}
    for owner, deps in graph.items():
        for dep in deps:
            parents.setdefault(dep, []).append(canonicalize_name(owner))
    seen: list[NormalizedName] = []
    todo = [name]
    while todo:
        for parent in sorted(parents.get(todo.pop(0), ())):
            if parent not in seen and parent in versions:
                seen.append(parent)
                todo.append(parent)
    for pick in ([n for n in seen if n in direct],
                 [n for n in seen if not parents.get(n)], seen):
        if pick:
            return pick[0]
    return name
