"""What an index offers, before it is judged for a target: links, the entries a
parser skipped, and the checks on a file name that need no target (is it a wheel
or sdist packaging can read, which project it belongs to).

:mod:`stacklock.index.pages` re-exports all of it; the parsers live there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from packaging.tags import parse_tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from stacklock.tablereader import parse_rfc3339
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from datetime import datetime

    from packaging.tags import Tag
    from packaging.utils import BuildTag
    from packaging.version import Version

    # (name, version, build, tags); an sdist has no build and no tags
    FileName = tuple[NormalizedName, Version, BuildTag, frozenset[Tag]]

__all__ = [
    "FileName",
    "Link",
    "ParsedPage",
    "SkippedLink",
    "classify_filename",
    "only_project",
    "parse_filename",
    "parse_upload_time",
    "project_of",
]

_OTHER_ARCHIVES = (".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tgz", ".tar", ".egg")


@dataclass(frozen=True, kw_only=True)
class Link:
    """One file an index offers. ``url`` may carry credentials in memory only:
    write ``redacted_url`` (or :func:`strip_credentials`) anywhere it persists."""

    filename: str
    url: str
    sha256: str | None = None
    requires_python: str | None = None
    yanked: str | None = None  # None = not yanked; "" = yanked without a reason
    metadata: bool = False  # PEP 658/714 METADATA file offered at url + ".metadata"
    metadata_sha256: str | None = None
    upload_time: datetime | None = None
    size: int | None = None

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def redacted_url(self) -> str:
        return redact_url(self.url)

    @property
    def metadata_url(self) -> str:
        return self.url + ".metadata"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, credentials redacted."""
        return {
            "filename": self.filename,
            "url": self.redacted_url,
            "sha256": self.sha256,
            "requires_python": self.requires_python,
            "yanked": self.yanked,
            "metadata": self.metadata,
            "metadata_sha256": self.metadata_sha256,
            "upload_time": self.upload_time.isoformat() if self.upload_time else None,
            "size": self.size,
        }


@dataclass(frozen=True, kw_only=True)
class SkippedLink:
    """An entry on a page that is not a usable wheel or sdist, and why."""

    link: Link
    reason: str


@dataclass(frozen=True, kw_only=True)
class ParsedPage:
    """What a page holds. ``anchors`` counts every entry seen (links + skipped);
    ``problem`` is set when the bytes are not an index page of the expected format."""

    links: tuple[Link, ...] = ()
    skipped: tuple[SkippedLink, ...] = ()
    anchors: int = 0
    problem: str | None = None


@lru_cache(maxsize=1 << 18)
def parse_filename(filename: str) -> FileName | str:
    """(name, version, build, tags) of a wheel or sdist file name as packaging
    reads it (an sdist has no build and no tags), else the reason it is neither.
    The one place file names are parsed; cached: a resolution asks about the same
    few hundred thousand names again."""
    if not filename:
        return "no file name in the URL (a folder or page link)"
    if filename.endswith(".whl"):
        try:
            return _parse_wheel(filename)
        except InvalidWheelFilename as exc:
            return f"wheel name packaging cannot parse: {exc}"
    if filename.endswith((".tar.gz", ".zip")):
        try:
            name, version = parse_sdist_filename(filename)
        except InvalidSdistFilename as exc:
            return f"sdist name packaging cannot parse: {exc}"
        return name, version, (), frozenset()
    if filename.endswith(_OTHER_ARCHIVES):
        return "legacy archive format, not a wheel or a .tar.gz/.zip sdist"
    return "not a wheel or sdist"


def _parse_wheel(filename: str) -> FileName:
    """``parse_wheel_filename``, its tag part parsed once per spelling: a page
    repeats the same few hundred tag triples over thousands of files, and
    packaging spends most of a name's time making their Tag objects. The name,
    version and build are packaging's reading of the name with a plain tag
    triple in place of the file's; packaging checks the tag part on its own
    (``parse_tag``), so any name either part refuses is parsed again whole, for
    packaging's own message."""
    stem = filename[:-4]
    dashes = stem.count("-")
    if dashes in (4, 5):
        tail = stem.split("-", dashes - 2)[-1]
        try:
            tags = _parse_tags(tail)
            name, version, build, _ = parse_wheel_filename(
                f"{stem[:-len(tail)]}py3-none-any.whl")
        except ValueError:  # InvalidTag, InvalidWheelFilename (packaging's)
            pass
        else:
            return name, version, build, tags
    return parse_wheel_filename(filename)


@lru_cache(maxsize=1 << 14)
def _parse_tags(tail: str) -> frozenset[Tag]:
    return parse_tag(tail)


def classify_filename(filename: str) -> str | None:
    """None if packaging accepts the name as a wheel or sdist, else the reason."""
    parsed = parse_filename(filename)
    return parsed if isinstance(parsed, str) else None


def parse_upload_time(value: Any) -> datetime | None:
    """A PEP 700 / ``data-upload-time`` value; None when absent, unparsable or
    without a time zone."""
    if not isinstance(value, str) or not value:
        return None
    parsed = parse_rfc3339(value.strip())
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def project_of(filename: str) -> NormalizedName | None:
    """The normalized project name of a wheel or sdist file name, else None."""
    parsed = parse_filename(filename)
    return None if isinstance(parsed, str) else parsed[0]


def only_project(page: ParsedPage, project: str) -> ParsedPage:
    """The files of one project from a page that lists many (a find-links page);
    entries that belong to no project are dropped."""
    name = canonicalize_name(project)
    links = tuple(li for li in page.links if project_of(li.filename) == name)
    return ParsedPage(links=links, anchors=len(links), problem=page.problem)
