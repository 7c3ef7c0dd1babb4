"""Evaluating one link against a target: does its file fit, and if not, why.

Checks run in a fixed order and the first failure is the reason: file name,
project, file kind, tags, requires-python, yanked, upload time. :class:`LinkEvaluator`
computes what the target contributes once; its :meth:`LinkEvaluator.could_fit` is a
string pre-filter on the file name's tag part that a resolution runs over every
file of a page, so packaging parses only the few wheels that can fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from stacklock.index.links import parse_filename

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from packaging.utils import NormalizedName
    from packaging.version import Version

    from stacklock.index.links import Link
    from stacklock.target import Target

__all__ = [
    "NO_UPLOAD_TIME_NOTE",
    "SDIST_NOTE",
    "SDIST_REASON",
    "Evaluation",
    "LinkEvaluator",
    "evaluate_link",
    "is_exact_pin",
]

SDIST_REASON = "sdist: [requirements] no-build refuses building it from source"
SDIST_NOTE = "sdist: built from source on install where no wheel of its version fits"
_SDIST_SUFFIXES = (".tar.gz", ".zip")
NO_UPLOAD_TIME_NOTE = (
    "no upload time on the index: kept despite the exclude-newer cut-off")


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """One link judged against the target. ``tag_rank`` is the position of the
    best matching tag in ``Target.tags()`` (lower is better); ``note`` records a
    caveat on a kept link (e.g. no upload time under a cut-off)."""

    link: Link
    index: str
    name: NormalizedName | None
    version: Version | None
    build: tuple[()] | tuple[int, str]
    compatible: bool
    reason: str | None
    tag_rank: int | None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "filename": self.link.filename,
            "version": str(self.version) if self.version is not None else None,
            "url": self.link.redacted_url,
            "sha256": self.link.sha256,
            "compatible": self.compatible,
            "reason": self.reason,
            "index": self.index,
            "build": list(self.build),
            "tag_rank": self.tag_rank,
            "requires_python": self.link.requires_python,
            "yanked": self.link.yanked,
            "upload_time": (self.link.upload_time.isoformat()
                            if self.link.upload_time else None),
            "metadata": self.link.metadata,
            "note": self.note,
        }


def is_exact_pin(specifier: SpecifierSet | str | None) -> bool:
    """``==1.2`` or ``===1.2`` (no wildcard): the only case a yanked file may be
    used, as PEP 592 and pip say."""
    if specifier is None:
        return False
    specs = list(SpecifierSet(str(specifier)))
    return len(specs) == 1 and (
        specs[0].operator == "===" or
        (specs[0].operator == "==" and not specs[0].version.endswith(".*")))


@lru_cache(maxsize=4096)
def _python_fits(requires_python: str, python: Version) -> bool | None:
    """Whether ``python`` satisfies the specifier; None when it is invalid."""
    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return None
    return spec.contains(python, prereleases=True)


class LinkEvaluator:
    """What judging a link needs from the target, computed once: the tag ranks,
    the Python version, and the tag parts for a cheap string pre-filter."""

    def __init__(self, target: Target, *, exclude_newer: datetime | None,
                 tag_ranks: dict[Any, int] | None = None,
                 no_build: bool | frozenset[str] = frozenset()) -> None:
        self.ranks = tag_ranks if tag_ranks is not None else {
            t: i for i, t in enumerate(target.tags())}
        self.sdist_rank = len(self.ranks)  # after every wheel
        self.no_build = no_build
        self.python = target.python_full_version
        major, minor = target.python_minor
        self.no_fit = (f"no tag fits cp{major}{minor}/"
                       f"manylinux_{target.manylinux}_{target.machine}: wheel has ")
        self.exclude_newer = exclude_newer
        self._parts = tuple(frozenset(getattr(t, part) for t in self.ranks)
                            for part in ("interpreter", "abi", "platform"))
        self._tails: dict[str, bool] = {}
        self._projects: dict[str, str] = {}
        self._tag_sets: dict[frozenset[Any], int | None] = {}

    def could_fit(self, filename: str) -> bool:
        """False only for a wheel none of whose tags the target can accept, read
        from the file name's last three parts by plain string checks (as
        packaging splits them: '-' between parts, '.' between alternatives,
        lower-cased), and for anything that is neither a wheel nor an sdist. A
        name with fewer than four '-' goes on to :meth:`evaluate` (packaging
        refuses it there)."""
        if filename[-4:] != ".whl":
            return filename.endswith(_SDIST_SUFFIXES)
        return self._wheel_could_fit(filename)

    def split_could_fit(self, names: Sequence[str | None]
                        ) -> tuple[list[int], list[int]]:
        """The positions of the ``names`` that :meth:`could_fit` keeps, wheels
        and sdists apart, in one pass (a resolution runs it over 160,000 names;
        None is no file)."""
        wheels: list[int] = []
        sdists: list[int] = []
        wheel_fits = self._wheel_could_fit
        for i, name in enumerate(names):
            if name is None:
                continue
            if name[-4:] == ".whl":
                if wheel_fits(name):
                    wheels.append(i)
            elif name.endswith(_SDIST_SUFFIXES):
                sdists.append(i)
        return wheels, sdists

    def _wheel_could_fit(self, filename: str) -> bool:
        head = filename.rsplit("-", 3)[0]
        if head.count("-") == 0:
            return True
        tail = filename[len(head) + 1:-4]  # "py-abi-platform"
        fits = self._tails.get(tail)
        if fits is None:  # the same few hundred tag triples repeat on every page
            fits = self._tails[tail] = all(
                any(x in accepted for x in text.split("."))
                for text, accepted in zip(tail.lower().split("-"), self._parts,
                                          strict=True))
        return fits

    def evaluate(self, link: Link, *, index: str, project: str) -> Evaluation:
        """See :func:`evaluate_link`."""
        parsed = parse_filename(link.filename)
        if isinstance(parsed, str):
            return Evaluation(link=link, index=index, name=None, version=None,
                              build=(), compatible=False, reason=parsed,
                              tag_rank=None)
        name, version, build, wheel_tags = parsed

        def verdict(reason: str | None, rank: int | None = None,
                    note: str | None = None) -> Evaluation:
            return Evaluation(link=link, index=index, name=name, version=version,
                              build=build, compatible=reason is None, reason=reason,
                              tag_rank=rank, note=note)

        wanted = self._projects.get(project)
        if wanted is None:
            wanted = self._projects[project] = canonicalize_name(project)
        if name != wanted:
            return verdict(f"file of project {name!r}, not {project!r}")
        if link.is_wheel:
            # tag sets come shared per spelling (parse_filename): rank each once
            best = self._tag_sets.get(wheel_tags, -1)
            if best == -1:
                fits = [self.ranks[t] for t in wheel_tags if t in self.ranks]
                best = self._tag_sets[wheel_tags] = min(fits) if fits else None
            if best is None:
                shown = ", ".join(sorted(str(t) for t in wheel_tags))
                return verdict(self.no_fit + shown)
            rank, note = best, None
        elif self.no_build is True or (
                self.no_build and name in self.no_build):
            return verdict(SDIST_REASON)
        else:
            rank, note = self.sdist_rank, SDIST_NOTE
        if link.requires_python:
            ok = _python_fits(link.requires_python, self.python)
            if ok is None:
                note = f"ignored invalid requires-python {link.requires_python!r}"
            elif not ok:
                return verdict(f"requires-python {link.requires_python} excludes "
                               f"{self.python}", rank)
        if link.yanked is not None:
            why = f": {link.yanked}" if link.yanked else ""
            return verdict(f"yanked{why}", rank)
        if self.exclude_newer is not None:
            if link.upload_time is None:
                # Kept on purpose, unlike uv (which drops it: "has no publish
                # time"): the PyTorch, sgl-kernel and flashinfer indexes publish
                # no upload times, so dropping would empty them. ``note`` says so.
                note = NO_UPLOAD_TIME_NOTE
            elif link.upload_time > self.exclude_newer:
                return verdict(
                    f"uploaded {link.upload_time.isoformat()}, after the "
                    f"exclude-newer cut-off {self.exclude_newer.isoformat()}", rank)
        return verdict(None, rank, note)


def evaluate_link(
    link: Link,
    *,
    index: str,
    project: str,
    target: Target,
    tag_ranks: dict[Any, int] | None = None,
    exclude_newer: datetime | None = None,
) -> Evaluation:
    """Evaluate one link. Checks run in a fixed order and the first failure is the
    reason: name, file kind, tags, requires-python, yanked, upload time."""
    evaluator = LinkEvaluator(target, exclude_newer=exclude_newer,
                              tag_ranks=tag_ranks)
    return evaluator.evaluate(link, index=index, project=project)
