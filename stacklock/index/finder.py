"""Which links fit a target, and which index a project comes from.

Index strategy (uv's safe default, "first-index"): a project pinned to an index
(``IndexSpec.packages``) comes only from that index; any other project comes from the
first index, in profile order, that has any link for it. Indexes are never mixed for
one project, so a look-alike upload on a later index cannot shadow the real one.

Every link gets an :class:`Evaluation`; a link that does not fit says why in
``reason`` (wrong tag, requires-python, yanked, newer than the cut-off, sdist, not
allowed on this index).
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.index.evaluate import (
    NO_UPLOAD_TIME_NOTE,
    SDIST_NOTE,
    SDIST_REASON,
    Evaluation,
    LinkEvaluator,
    evaluate_link,
    is_exact_pin,
)
from stacklock.index.links import parse_filename
from stacklock.index.pages import REASON, classify_filename, link_of
from stacklock.index.versions import (
    VersionFiles,
    group_versions,
    is_yanked_reason,
    sdist_version_text,
)
from stacklock.index.versions import allow_yanked as allow_yanked_file
from stacklock.urls import redact_url
from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from collections.abc import Set as AbstractSet
    from datetime import datetime

    from packaging.utils import NormalizedName

    from stacklock.index.client import IndexClient
    from stacklock.index.pages import SkippedLink
    from stacklock.profile import IndexSpec
    from stacklock.target import Target

__all__ = [
    "NO_UPLOAD_TIME_NOTE",
    "SDIST_NOTE",
    "SDIST_REASON",
    "Evaluation",
    "Finder",
    "LinksReport",
    "evaluate_link",
    "find_links",
    "is_exact_pin",
    "render_links",
    "render_links_summary",
]


def _skipped(entry: SkippedLink, index: str) -> Evaluation:
    return Evaluation(link=entry.link, index=index, name=None, version=None,
                      build=(), compatible=False, reason=entry.reason, tag_rank=None)


class Finder:
    """Evaluates the links of one project against ``target`` across ``indexes``.

    Safe to share between threads: pages are fetched once (the client memoises
    them under a lock); at worst two threads evaluate the same page twice.
    """

    def __init__(
        self,
        client: IndexClient,
        indexes: Sequence[IndexSpec],
        target: Target,
        *,
        exclude_newer: datetime | None = None,
        no_build: bool | frozenset[str] = frozenset(),
        yanked_pins: Mapping[NormalizedName, AbstractSet[Version]] | None = None,
    ) -> None:
        self.client = client
        # project -> the versions the profile pins exactly: their yanked files
        # may be used (PEP 592, as uv does)
        self.yanked_pins = dict(yanked_pins or {})
        self.indexes = tuple(indexes)
        self.target = target
        self.exclude_newer = exclude_newer
        self._evaluator = LinkEvaluator(target, exclude_newer=exclude_newer,
                                        no_build=no_build)
        self._chosen: dict[str, IndexSpec | None] = {}
        self._evaluations: dict[tuple[str, str], list[Evaluation]] = {}
        self._fitting: dict[tuple[str, str], list[Evaluation]] = {}
        self._groups: dict[str, list[VersionFiles]] = {}

    def pinned_index(self, project: str) -> IndexSpec | None:
        name = canonicalize_name(project)
        return next((i for i in self.indexes if name in i.packages), None)

    def index_for(self, project: str) -> IndexSpec | None:
        """The pinned index, else the first index with any link for the project;
        None when no index has it."""
        name = canonicalize_name(project)
        if name not in self._chosen:
            chosen = self.pinned_index(name)
            if chosen is None:
                chosen = next((i for i in self.indexes
                               if self.client.has_links(i, name)), None)
            self._chosen[name] = chosen
        return self._chosen[name]

    def close_names(self, project: str) -> list[str]:
        """Names close to ``project`` that the indexes it may come from list
        (its pinned index, else all): for a project no index has."""
        from stacklock.index.names import close_names

        pinned = self.pinned_index(canonicalize_name(project))
        names: list[str] = []
        for index in (pinned,) if pinned is not None else self.indexes:
            names += self.client.project_names(index)
        return close_names(project, names)

    def is_local(self, project: str) -> bool:
        """Whether the project's candidates can be found without a request (its
        index chosen and that page local, else every index's page local)."""
        name = canonicalize_name(project)
        chosen = self._chosen.get(name) or self.pinned_index(name)
        if chosen is not None:
            return self.client.is_local(chosen, name)
        return all(self.client.is_local(i, name) for i in self.indexes)

    def evaluate(self, project: str, *, all_indexes: bool = False) -> list[Evaluation]:
        """Every link of the chosen index with a verdict, best first (then the
        page's skipped entries). ``all_indexes=True`` adds the links of the other
        indexes, each with the reason it may not be used."""
        chosen = self.index_for(project)
        out: list[Evaluation] = []
        if chosen is not None:
            out += self.evaluate_index(chosen, project)
        if all_indexes:
            pinned = self.pinned_index(project)
            for other in self.indexes:
                if chosen is not None and other.name == chosen.name:
                    continue
                if pinned is not None:
                    why = (f"not allowed on this index: {project} is pinned to "
                           f"index {pinned.name!r}")
                elif chosen is not None:
                    why = (f"not used: {project} comes from index {chosen.name!r}, "
                           "the first that has it (indexes are not mixed)")
                else:  # pragma: no cover - no index has links, so none to add
                    why = "not used"
                for ev in self.evaluate_index(other, project):
                    out.append(replace(ev, compatible=False, reason=why))
        return out

    def find_candidates(
        self, project: str, *, specifier: SpecifierSet | str | None = None
    ) -> list[Evaluation]:
        """Compatible files of the chosen index, best first: a version's wheels,
        or its sdist where none of its wheels fits (uv's default). With
        ``specifier``, only versions it allows (pre-releases included: the
        resolver decides), and yanked files too when it is an exact pin."""
        spec = SpecifierSet(str(specifier)) if specifier is not None else None
        allow_yanked = is_exact_pin(spec)
        out: list[Evaluation] = []
        chosen = self.index_for(project)
        if chosen is None:
            return out
        for ev in self.fitting(chosen, project):
            if spec is not None and (
                    ev.version is None or
                    not spec.contains(ev.version, prereleases=True)):
                continue
            if ev.compatible:
                out.append(ev)
            elif allow_yanked and is_yanked_reason(ev.reason):
                out.append(allow_yanked_file(ev))
        with_wheel = {ev.version for ev in out if ev.link.is_wheel}
        return [ev for ev in out if ev.link.is_wheel or ev.version not in with_wheel]

    def version_groups(self, project: str) -> list[VersionFiles]:
        """The versions of the chosen index with a file that can fit, newest
        first, each judged when asked (:mod:`stacklock.index.versions`): what
        the resolver walks. Remembered per project."""
        name = canonicalize_name(project)
        found = self._groups.get(name)
        if found is None:
            chosen = self.index_for(name)
            found = [] if chosen is None else group_versions(
                self.client.get_rows(chosen, name), chosen, project,
                self._evaluator, _best_first, self.yanked_pins.get(name, frozenset()))
            self._groups[name] = found
        return found

    def fitting(self, index: IndexSpec, project: str) -> list[Evaluation]:
        """The links of one index that pass the cheap tag pre-filter, judged and
        best first: a superset of the compatible ones (yanked wheels too), found
        without judging the other files of the page (often nine in ten)."""
        key = (index.name, canonicalize_name(project))
        found = self._fitting.get(key)
        if found is None:
            evaluate = self._evaluator.evaluate
            page = self.client.get_rows(index, project)
            names = page.filenames()
            wheels, sdists = self._evaluator.split_could_fit(names)
            judged = []
            for i in wheels:
                row = page.row(i)
                if row[REASON] is None:
                    judged.append(evaluate(link_of(row), index=index.name,
                                           project=project))
            # an sdist never competes with a fitting wheel of its version
            # (find_candidates drops it): those are not judged, nor read, nor
            # parsed when their version is spelt as a fitting wheel spells it
            fitting = [e for e in judged if e.compatible]
            with_wheel = {e.version for e in fitting}
            spelt = {e.link.filename.split("-", 2)[1] for e in fitting}
            for i in sdists:
                if sdist_version_text(names[i]) in spelt:  # type: ignore[arg-type]
                    continue
                parsed = parse_filename(names[i])
                if isinstance(parsed, str) or parsed[1] not in with_wheel:
                    row = page.row(i)
                    if row[REASON] is None:
                        judged.append(evaluate(link_of(row), index=index.name,
                                               project=project))
            found = self._fitting[key] = _best_first(
                [e for e in judged if e.version is not None])
        return found

    def count_wheels(self, project: str, version: Version) -> int:
        """How many wheels of ``version`` the chosen index has, fitting or not.
        Only the file names that spell a version are parsed, each spelling
        once: a page of 20,000 files is not judged for one sdist's note."""
        chosen = self.index_for(project)
        if chosen is None:
            return 0
        same: dict[str, bool] = {}
        count = 0
        for name in self.client.get_rows(chosen, project).filenames():
            if name is None or not name.endswith(".whl") or name.count("-") < 4:
                continue
            text = name.split("-", 2)[1]
            if text not in same:
                try:
                    same[text] = Version(text) == version
                except InvalidVersion:
                    same[text] = False
            if same[text] and classify_filename(name) is None:
                count += 1
        return count

    def evaluate_index(self, index: IndexSpec, project: str) -> list[Evaluation]:
        """Every link one index has for the project, best first, then the
        page's skipped entries (cached per index and project)."""
        key = (index.name, canonicalize_name(project))
        if key not in self._evaluations:
            page = self.client.get_page(index, project)
            found = [self._evaluator.evaluate(link, index=index.name, project=project)
                     for link in page.links]
            ranked = _best_first([e for e in found if e.version is not None])
            unparsed = [e for e in found if e.version is None]
            self._evaluations[key] = (
                ranked + unparsed + [_skipped(s, index.name) for s in page.skipped])
        return self._evaluations[key]


def _best_first(found: list[Evaluation]) -> list[Evaluation]:
    """Version desc, build tag desc, tag rank asc (then file name, for a stable
    order of duplicates): two stable sorts, the second one reversed (which keeps
    the order of equal keys), so no comparison runs in Python but Version's."""
    found.sort(key=_rank_and_name)
    found.sort(key=_version_and_build, reverse=True)
    return found


def _rank_and_name(ev: Evaluation) -> tuple[int, str]:
    return (ev.tag_rank if ev.tag_rank is not None else 1 << 30, ev.link.filename)


def _version_and_build(ev: Evaluation) -> tuple[Any, ...]:
    return (ev.version, ev.build)


@dataclass(frozen=True, kw_only=True)
class LinksReport:
    """What ``stacklock links`` shows: every link of one project on one index."""

    project: str
    index: IndexSpec
    target: Target
    evaluations: tuple[Evaluation, ...]

    def to_dict(self) -> dict[str, Any]:
        """``stacklock links --json`` (``stacklock.links/1``)."""
        target = self.target
        return {"project": self.project,
                "index": {"name": self.index.name, "url": redact_url(self.index.url),
                          "kind": self.index.kind},
                "target": {"python": target.python, "platform": target.platform,
                           "manylinux": target.manylinux,
                           "gpu_arch": list(target.gpu_arch)},
                "links": [ev.to_dict() for ev in self.evaluations]}


def find_links(
    project: str,
    index: IndexSpec,
    target: Target,
    *,
    client: IndexClient,
    exclude_newer: datetime | None = None,
) -> LinksReport:
    """Evaluate every link ``index`` has for ``project`` (the ``links`` verb)."""
    finder = Finder(client, [index], target, exclude_newer=exclude_newer)
    return LinksReport(project=project, index=index, target=target,
                       evaluations=tuple(finder.evaluate_index(index, project)))


def render_links_summary(report: LinksReport, *, newest: int = 10) -> str:
    """The default view of ``stacklock links``: per version (newest ``newest``)
    its wheels and sdists, how many fit the target, and the commonest reason
    the others do not; then the totals. ``--all`` gives :func:`render_links`."""
    if not report.evaluations:
        return render_links(report)
    by_version: dict[Version | None, list[Evaluation]] = {}
    for ev in report.evaluations:
        by_version.setdefault(ev.version, []).append(ev)
    versions = sorted((v for v in by_version if v is not None), reverse=True)
    rows = [("version", "wheels", "sdists", "fit", "why the others do not")]
    for version in versions[:newest]:
        found = by_version[version]
        wheels = sum(ev.link.filename.endswith(".whl") for ev in found)
        reasons = Counter((ev.reason or "").partition(":")[0]
                          for ev in found if not ev.compatible)
        why = ", ".join(f"{reason} ({n})" for reason, n in reasons.most_common(2))
        rows.append((str(version), str(wheels), str(len(found) - wheels),
                     str(sum(ev.compatible for ev in found)), why))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"{report.project} on {report.index.name} "
             f"({redact_url(report.index.url)}), for python {report.target.python} "
             f"{report.target.platform} manylinux_{report.target.manylinux}:"]
    lines.extend("  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                  for i, (cell, w) in enumerate(zip(row, widths,
                                                                    strict=False)))
                 + (f"  {row[4]}" if row[4] else "") for row in rows)
    older = len(versions) - min(len(versions), newest)
    fits = sum(ev.compatible for ev in report.evaluations)
    lines.append(f"{counted(len(report.evaluations), 'link')} in "
                 f"{counted(len(versions), 'version')}, "
                 f"{fits} fit" + (f"; {counted(older, 'older version')} not shown"
                                  if older else "")
                 + " (--all lists every link, --json every field)")
    return "\n".join(lines) + "\n"


def render_links(report: LinksReport, *, width: int = 160) -> str:
    """A rich table as plain text: per link its file name with the (redacted) URL
    and sha256 under it, the version, whether it fits and why not; then a summary
    line."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{report.project} on {report.index.name} "
                        f"({redact_url(report.index.url)})", title_justify="left",
                  show_lines=True, expand=True)
    table.add_column("file / url / sha256", overflow="fold", ratio=3)
    table.add_column("version", no_wrap=True)
    table.add_column("fits", no_wrap=True)
    table.add_column("reason / note", overflow="fold", ratio=2)
    for ev in report.evaluations:
        table.add_row(
            f"{ev.link.filename}\n{ev.link.redacted_url or '-'}\n"
            f"sha256: {ev.link.sha256 or 'null'}",
            str(ev.version) if ev.version is not None else "-",
            "yes" if ev.compatible else "no",
            ev.reason or ev.note or "",
        )
    fits = sum(ev.compatible for ev in report.evaluations)
    if not report.evaluations:
        return (f"{report.project} is not on index {report.index.name} "
                f"({redact_url(report.index.url)}): no project page there (give "
                "the index root, e.g. .../simple, not the project's own page)\n")
    console = Console(width=width, record=True, file=io.StringIO(),
                      color_system=None)
    console.print(table)
    console.print(f"{counted(len(report.evaluations), 'link')}, {fits} fit "
                  f"python {report.target.python} {report.target.platform} "
                  f"manylinux_{report.target.manylinux}")
    return console.export_text()
