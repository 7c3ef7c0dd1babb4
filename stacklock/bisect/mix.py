"""An intermediate environment: GOOD's entries for some changes, BAD's for the rest.

The locked entries already carry their URLs and hashes, so a mix is made by
choosing entries, never by resolving. Whether a mix can work is read from the
entries' own requirements (:func:`mix_violations`): a requirement the mix breaks
that neither end breaks makes it incoherent (a requirement both ends break, an
override, is the stack's own choice, not the mix's).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from stacklock.bisect.changes import TOOLKIT, violates

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from packaging.requirements import Requirement

    from stacklock.bisect.requirements import Requirements
    from stacklock.lock import Lock, LockedPackage

__all__ = ["Violation", "absolute_paths", "make_mix", "mix_violations"]

@dataclass(frozen=True, order=True)
class Violation:
    """``requirer`` at ``version`` requires ``requirement``; the mix has
    ``found`` (a version, or "absent"). ``asker`` is the changed package whose
    requirement it is, or whose extra brought it in."""

    asker: str
    requirer: str
    version: str
    requirement: str
    required: str
    found: str

    def __str__(self) -> str:
        via = "" if self.asker == self.requirer else f" (for {self.asker})"
        return (f"{self.requirer} {self.version} requires {self.requirement}"
                f"{via}, the mix has {self.found}")


def absolute_paths(lock: Lock) -> Lock:
    """``lock`` with every relative file ``path`` made absolute, its patches'
    too (PEP 751 reads them relative to the lock, and a mix is written
    elsewhere)."""
    base = Path(lock.path).parent.resolve()

    def fixed(pkg: LockedPackage) -> LockedPackage:
        entry = pkg.entry
        wheels = [replace(w, path=str(base / w.path))
                  if w.path and not Path(w.path).is_absolute() else w
                  for w in entry.wheels or ()]
        sdist = entry.sdist
        if sdist is not None and sdist.path and not Path(sdist.path).is_absolute():
            sdist = replace(sdist, path=str(base / sdist.path))
        patches = tuple(replace(p, path=str(base / p.path))
                        for p in pkg.tool.patches)  # read by install, from the mix
        return replace(pkg, entry=replace(entry, wheels=wheels or entry.wheels,
                                          sdist=sdist),
                       tool=replace(pkg.tool, patches=patches))

    return replace(lock, packages=tuple(fixed(p) for p in lock.packages))


def make_mix(good: Lock, bad: Lock, applied: Iterable[str], *, path: str) -> Lock:
    """GOOD with BAD's entries for the ``applied`` names (the toolkit too when
    :data:`TOOLKIT` is among them); packages in the order the locks use."""
    chosen = set(applied)
    packages = [p for p in good.packages if p.name not in chosen]
    packages += [p for p in bad.packages if p.name in chosen]
    packages.sort(key=lambda p: (p.name, str(p.marker or "")))
    stack = good.stack
    if stack is not None:
        known = {i.name for i in stack.indexes}
        extra = tuple(i for i in (bad.stack.indexes if bad.stack else ())
                      if i.name not in known)
        stack = replace(stack, indexes=stack.indexes + extra)
        if TOOLKIT in chosen:
            stack = replace(stack, cuda=bad.cuda)
    return replace(good, path=path, packages=tuple(packages), stack=stack)


def mix_violations(
    lock: Lock,
    names: Iterable[str],
    requirements: Callable[[LockedPackage], Requirements],
) -> set[Violation]:
    """Every requirement of the packages ``names`` that ``lock`` breaks, and
    of the extras they ask of other packages (``requirements(package)`` is the
    reader for that package's end)."""
    out: set[Violation] = set()
    for name in names:
        pkg = lock.package(name)
        if pkg is None:
            continue
        for req in requirements(pkg)(pkg):
            other = lock.package(req.name)
            out |= _broken(pkg.name, pkg, req, other)
            if other is None or not req.extras:
                continue
            read = requirements(other)
            base = set(map(str, read(other)))
            for extra in read(other, frozenset(req.extras)):
                if str(extra) not in base:
                    out |= _broken(pkg.name, other, extra,
                                   lock.package(extra.name))
    return out


def _broken(asker: str, pkg: LockedPackage, req: Requirement,
            other: LockedPackage | None) -> set[Violation]:
    version = other.version if other is not None else None
    if not violates(req, version):
        return set()
    return {Violation(asker=asker, requirer=pkg.name, version=str(pkg.version),
                      requirement=str(req), required=canonicalize_name(req.name),
                      found=str(version) if version is not None else "absent")}
