"""A project's versions read from its file names, each version's files judged
only when the resolver asks for them.

A resolution looks at one to three versions of most projects, but a page lists
every release: judging every file that can fit (building its row, link and
:class:`~stacklock.index.evaluate.Evaluation`) took 13,881 judgments for a cold
sglang resolution and 4,695 for transformers + accelerate + torch. Here a page's
names are split into wheels and sdists that can fit (the string pre-filter), the
version of each is read from its name (parsed once per spelling), and the files
are grouped by version, newest first. :meth:`VersionFiles.judge` then judges one
version's files, with the rule :meth:`Finder.find_candidates` applies: the
compatible wheels best first, or, where none is compatible, the version's
compatible sdists. A version whose files all fail (requires-python, yanked,
newer than the cut-off) judges to nothing, but for yanked files of a version
the profile pins exactly (``==`` or ``===``, PEP 592): those are used, with a
note naming the yank.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from stacklock.index.pages import REASON, link_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from collections.abc import Set as AbstractSet

    from stacklock.index.evaluate import Evaluation, LinkEvaluator
    from stacklock.index.pages import PageRows
    from stacklock.profile import IndexSpec

__all__ = ["VersionFiles", "allow_yanked", "group_versions", "is_yanked_reason",
           "sdist_version_text"]


class VersionFiles:
    """The files of one version on one page that can fit, judged on demand."""

    def __init__(self, *, version: Version, index: IndexSpec, project: str,
                 page: PageRows, wheels: list[int], sdists: list[int],
                 evaluator: LinkEvaluator,
                 best_first: Callable[[list[Evaluation]], list[Evaluation]],
                 allow_yanked: bool = False) -> None:
        self.version = version
        self.allow_yanked = allow_yanked
        self.index = index
        self._project = project
        self._page = page
        self._wheels = wheels
        self._sdists = sdists
        self._evaluator = evaluator
        self._best_first = best_first
        self._judged: tuple[Evaluation, ...] | None = None
        self._lock = threading.Lock()

    def judge(self) -> tuple[Evaluation, ...]:
        """The compatible files, best first (see the module docstring); judged
        once, whichever thread asks first."""
        if self._judged is None:
            with self._lock:
                if self._judged is None:
                    found = self._compatible(self._wheels)
                    if not found:
                        found = self._compatible(self._sdists)
                    self._judged = tuple(self._best_first(found))
        return self._judged

    def _compatible(self, positions: Sequence[int]) -> list[Evaluation]:
        out = []
        for i in positions:
            row = self._page.row(i)
            if row[REASON] is not None:
                continue
            ev = self._evaluator.evaluate(link_of(row), index=self.index.name,
                                          project=self._project)
            if ev.version != self.version:
                continue
            if ev.compatible:
                out.append(ev)
            elif self.allow_yanked and is_yanked_reason(ev.reason):
                out.append(allow_yanked(ev))
        return out


def is_yanked_reason(reason: str | None) -> bool:
    """Whether an evaluation failed only for being yanked (the checks before
    it, tags and requires-python, passed)."""
    return reason is not None and reason.startswith("yanked")


def allow_yanked(ev: Evaluation) -> Evaluation:
    """A yanked file taken because the profile pins its version exactly."""
    return replace(ev, compatible=True, reason=None,
                   note=f"{ev.reason}; allowed by the exact pin =={ev.version} "
                   "(PEP 592)")


def group_versions(
    page: PageRows, index: IndexSpec, project: str, evaluator: LinkEvaluator,
    best_first: Callable[[list[Evaluation]], list[Evaluation]],
    yanked_pins: AbstractSet[Version] = frozenset(),
) -> list[VersionFiles]:
    """The versions of ``page`` with a file that can fit, newest first;
    ``yanked_pins`` are the versions whose yanked files may be used."""
    names = page.filenames()
    wheels, sdists = evaluator.split_could_fit(names)
    parsed: dict[str, Version | None] = {}
    groups: dict[Version, tuple[list[int], list[int]]] = {}
    for positions, kind in ((wheels, 0), (sdists, 1)):
        for i in positions:
            name: Any = names[i]
            text = _version_text(name, sdist=bool(kind))
            if text in parsed:
                version = parsed[text]
            else:
                version = parsed[text] = _parse(text)
            if version is None:
                continue  # packaging refuses the name: evaluate would say so
            groups.setdefault(version, ([], []))[kind].append(i)
    return [
        VersionFiles(version=v, index=index, project=project, page=page,
                     wheels=w, sdists=s, evaluator=evaluator, best_first=best_first,
                     allow_yanked=v in yanked_pins)
        for v, (w, s) in sorted(groups.items(), key=lambda kv: kv[0], reverse=True)
    ]


def _version_text(filename: str, *, sdist: bool) -> str:
    """The version part of a file name as packaging splits it, unparsed: a
    wheel's second '-'-separated part, an sdist's (:func:`sdist_version_text`)."""
    if sdist:
        return sdist_version_text(filename)
    parts = filename.split("-", 2)
    return parts[1] if len(parts) > 2 else ""


def sdist_version_text(filename: str) -> str:
    """The version part of an sdist's name as packaging's
    ``parse_sdist_filename`` splits it (after the stem's last '-'), unparsed."""
    stem = filename[:-7] if filename.endswith(".tar.gz") else filename[:-4]
    return stem.rpartition("-")[2]


def _parse(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None
