"""Pure parsers of index pages: bytes in, rows and links out.

A parser never fetches and never raises on a bad href: anything that is not a wheel
or an sdist, or whose name packaging cannot parse, lands in ``ParsedPage.skipped``
with a reason. Whether a page is an index at all is the client's call; a parser only
says what it found (``ParsedPage.problem`` for JSON of the wrong shape).

Formats: PEP 503 HTML (plus PEP 592 yanked, PEP 658/714 metadata attributes and
PyTorch's ``data-upload-time``), PEP 691 JSON (plus PEP 700 ``upload-time`` and
``size``), flat find-links pages, and plain file listings of a local folder.
The link model (:class:`Link`, :class:`ParsedPage`...) lives in
:mod:`stacklock.index.links` and is re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, unquote, urljoin, urlsplit

from packaging.utils import canonicalize_name

from stacklock.bounded import Malformed, check_json_nesting, parse_json
from stacklock.index.json_scan import ScannedFiles, scan_files
from stacklock.index.links import (
    Link,
    ParsedPage,
    SkippedLink,
    classify_filename,
    only_project,
    parse_upload_time,
    project_of,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "Link",
    "PageRows",
    "ParsedPage",
    "SkippedLink",
    "classify_filename",
    "link_of",
    "only_project",
    "only_project_rows",
    "parse_file_listing",
    "parse_flat_page",
    "parse_html_page",
    "parse_json_page",
    "project_of",
    "rows_from_html",
    "rows_from_json",
    "rows_from_listing",
]

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def _split_fragment(url: str) -> tuple[str, str | None]:
    """(url without fragment, sha256 from ``#sha256=`` or None). Other hash
    fragments (md5=, sha1=...) and junk are ignored."""
    base, _, fragment = url.partition("#")
    sha: str | None = None
    for part in fragment.split("&"):
        name, eq, value = part.partition("=")
        if eq and name.lower() == "sha256" and _SHA256_RE.match(value.lower()):
            sha = value.lower()
    return base, sha


def _join(base: str, href: str) -> str:
    """``urljoin``, skipped for the absolute URLs that PyPI's JSON gives (for
    those urljoin is the identity, and it costs microseconds per file)."""
    if href.startswith(("https://", "http://")) and "?" not in href and \
            ";" not in href:
        return href
    return urljoin(base, href)


def _filename_of(url: str) -> str:
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def _metadata_attr(value: str | None) -> tuple[bool, str | None]:
    """PEP 658/714 attribute: "true" or "<hashname>=<hex>"; absent -> no file."""
    if value is None:
        return False, None
    text = value.strip()
    if text.lower() == "true":
        return True, None
    name, eq, digest = text.partition("=")
    if not eq:
        return False, None
    if name.lower() == "sha256" and _SHA256_RE.match(digest.lower()):
        return True, digest.lower()
    return True, None


# -- rows: a page before its links are judged ----------------------------------------
#
# A row is a plain tuple, so a page of 20,000 files costs no objects beyond it and
# caches as a marshal blob: (filename, url, sha256, requires_python, yanked,
# metadata, metadata_sha256, upload_time (ISO text as the index gave it), size,
# reason). ``reason`` is set only for entries the parser itself could not read
# (no href, no url); whether packaging accepts the file name is asked later, and
# only for the rows someone looks at (:func:`classify_filename`).

Row = tuple[str, str, str | None, str | None, str | None, bool, str | None,
            str | None, int | None, str | None]
# the row's fields, by position (Final: mypy then knows each field's type)
FILENAME: Final = 0
URL: Final = 1
SHA256: Final = 2
REQUIRES_PYTHON: Final = 3
YANKED: Final = 4
METADATA: Final = 5
METADATA_SHA256: Final = 6
UPLOAD_TIME: Final = 7
SIZE: Final = 8
REASON: Final = 9


def link_of(row: Row) -> Link:
    """The :class:`Link` a row describes."""
    return Link(filename=row[FILENAME], url=row[URL], sha256=row[SHA256],
                requires_python=row[REQUIRES_PYTHON], yanked=row[YANKED],
                metadata=row[METADATA], metadata_sha256=row[METADATA_SHA256],
                upload_time=parse_upload_time(row[UPLOAD_TIME]), size=row[SIZE])


@dataclass(frozen=True, kw_only=True)
class PageRows:
    """A page as rows (see above): what the client caches and the finder scans.
    A PEP 691 page keeps its ``files`` as ``json`` gave them and makes a row
    only when asked (:meth:`row`): a cold resolution then builds rows for the
    few files that could fit the target, not for all 160,000.
    ``to_page`` judges every file name and gives the :class:`ParsedPage`."""

    rows: tuple[Row, ...] = ()
    # PEP 691 "files", rows made from them lazily (a large page's entries are
    # not even decoded until asked for: stacklock.index.json_scan)
    files: list[Any] | ScannedFiles | None = None
    base_url: str = ""
    anchors: int = 0
    problem: str | None = None
    _memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.files) if self.files is not None else len(self.rows)

    def row(self, i: int) -> Row:
        if self.files is None:
            return self.rows[i]
        return _json_row(self.files[i], self.base_url)

    def all_rows(self) -> tuple[Row, ...]:
        if self.files is None:
            return self.rows
        if "rows" not in self._memo:
            self._memo["rows"] = tuple(_json_row(e, self.base_url)
                                       for e in self.files)
        return self._memo["rows"]  # type: ignore[no-any-return]

    def filenames(self) -> list[str | None]:
        """Each entry's file name; None for one that has no URL (no file)."""
        if self.files is None:
            return [r[FILENAME] if r[REASON] is None else None for r in self.rows]
        names: list[Any]
        if isinstance(self.files, ScannedFiles):
            names = list(self.files.names)  # strings the scan read
            if "" not in names:  # the common case: no Python loop over them
                return names
        else:
            names = [e.get("filename") if type(e) is dict else None
                     for e in self.files]
        for i, name in enumerate(names):
            if type(name) is not str or not name:  # rare: taken from the URL
                made = self.row(i)
                names[i] = made[FILENAME] if made[REASON] is None else None
        return names

    def to_page(self) -> ParsedPage:
        links: list[Link] = []
        skipped: list[SkippedLink] = []
        for row in self.all_rows():
            reason = (row[REASON] if row[REASON] is not None
                      else classify_filename(row[FILENAME]))
            if reason is None:
                links.append(link_of(row))
            else:
                skipped.append(SkippedLink(link=link_of(row), reason=reason))
        return ParsedPage(links=tuple(links), skipped=tuple(skipped),
                          anchors=self.anchors, problem=self.problem)

    def has_links(self) -> bool:
        """Whether any entry is a wheel or sdist packaging accepts."""
        return any(row[REASON] is None and classify_filename(row[FILENAME]) is None
                   for row in map(self.row, range(len(self))))


def _attr(tag: Any, name: str) -> str | None:
    value = tag.get(name)
    if isinstance(value, list):  # bs4 splits multi-valued attributes; none of ours
        value = " ".join(value)
    return None if value is None else str(value)


def rows_from_html(content: bytes, base_url: str) -> PageRows:
    """A PEP 503 project page. Relative hrefs resolve against ``<base href>`` if
    present, else ``base_url``; the file name is the unquoted last path segment."""
    from bs4 import BeautifulSoup  # only HTML pages need it (80 ms to import)

    soup = BeautifulSoup(content, "html.parser")
    base = base_url
    base_tag = soup.find("base", href=True)
    if base_tag is not None:
        base = urljoin(base_url, str(_attr(base_tag, "href")))
    rows: list[Row] = []
    anchors = soup.find_all("a")
    for anchor in anchors:
        href = _attr(anchor, "href")
        if href is None or not href.strip():
            rows.append((anchor.get_text(strip=True), "", None, None, None, False,
                         None, None, None, "anchor without href"))
            continue
        url, sha = _split_fragment(urljoin(base, href.strip()))
        core = _attr(anchor, "data-core-metadata")
        if core is None:
            core = _attr(anchor, "data-dist-info-metadata")
        metadata, metadata_sha = _metadata_attr(core)
        rows.append((_filename_of(url), url, sha,
                     _attr(anchor, "data-requires-python") or None,
                     _attr(anchor, "data-yanked"), metadata, metadata_sha,
                     _attr(anchor, "data-upload-time"), None, None))
    return PageRows(rows=tuple(rows), anchors=len(anchors))


def parse_html_page(content: bytes, base_url: str) -> ParsedPage:
    """A PEP 503 project page, its links judged (see :func:`rows_from_html`)."""
    return rows_from_html(content, base_url).to_page()


def parse_flat_page(content: bytes, base_url: str) -> ParsedPage:
    """A find-links page: any HTML page whose anchors point at distribution files,
    possibly of many projects (the caller filters by project name)."""
    return parse_html_page(content, base_url)


def _json_hashes(value: Any) -> str | None:
    if type(value) is dict:
        sha = value.get("sha256")
        if type(sha) is str and len(sha) == 64:
            sha = sha.lower()
            if _SHA256_RE.match(sha):
                return sha
    return None


def _json_yanked(value: Any) -> str | None:
    if value is None or value is False:
        return None
    if value is True:
        return ""
    return value if type(value) is str else None


_NO_METADATA = (False, None)
_METADATA = (True, None)


def _json_metadata(value: Any) -> tuple[bool, str | None]:
    if value is None or value is False:
        return _NO_METADATA
    if value is True:
        return _METADATA
    if type(value) is dict:
        return True, _json_hashes(value)
    return _NO_METADATA


def rows_from_json(content: bytes, base_url: str) -> PageRows:
    """A PEP 691 project page (``application/vnd.pypi.simple.v1+json``)."""
    scanned = scan_files(content)
    if scanned is not None:  # decoded entry by entry: bounded as a whole first
        try:
            check_json_nesting(content)
        except Malformed as exc:
            return PageRows(problem=str(exc))
        return PageRows(files=scanned, base_url=base_url, anchors=len(scanned))
    try:
        data = parse_json(content)
    except Malformed as exc:
        return PageRows(problem=str(exc))
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return PageRows(problem="JSON without a 'files' list (not a PEP 691 page)")
    files = data["files"]
    return PageRows(files=files, base_url=base_url, anchors=len(files))


def _json_row(entry: Any, base_url: str) -> Row:
    """The row of one PEP 691 file entry."""
    href = entry.get("url") if type(entry) is dict else None
    if type(href) is not str:
        return (str(entry)[:80], "", None, None, None, False, None, None, None,
                "file entry without a url")
    url = _join(base_url, href)
    fragment_sha = None
    if "#" in url:
        url, fragment_sha = _split_fragment(url)
    filename = entry.get("filename")
    if type(filename) is not str or not filename:
        filename = _filename_of(url)
    core = entry.get("core-metadata")
    if core is None:
        core = entry.get("dist-info-metadata")
    metadata, metadata_sha = _json_metadata(core)
    rp = entry.get("requires-python")
    size = entry.get("size")
    when = entry.get("upload-time")
    return (filename, url, _json_hashes(entry.get("hashes")) or fragment_sha,
            rp if type(rp) is str and rp else None,
            _json_yanked(entry.get("yanked")), metadata, metadata_sha,
            when if type(when) is str else None,
            size if type(size) is int and size >= 0 else None, None)


def parse_json_page(content: bytes, base_url: str) -> ParsedPage:
    """A PEP 691 project page, its links judged (see :func:`rows_from_json`)."""
    return rows_from_json(content, base_url).to_page()


def rows_from_listing(
    entries: Iterable[tuple[str, int | None, str | None]], base_url: str
) -> PageRows:
    """A local folder's files as ``(name, size, sha256)``, sorted by name: what a
    ``file://`` find-links folder offers."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    rows: list[Row] = [(name, urljoin(base, quote(name)), sha, None, None, False,
                        None, None, size, None)
                       for name, size, sha in sorted(entries)]
    return PageRows(rows=tuple(rows), anchors=len(rows))


def parse_file_listing(
    entries: Iterable[tuple[str, int | None, str | None]], base_url: str
) -> ParsedPage:
    """:func:`rows_from_listing`, its links judged."""
    return rows_from_listing(entries, base_url).to_page()


def only_project_rows(page: PageRows, project: str) -> PageRows:
    """:func:`only_project` on rows: the rows packaging reads as this project's."""
    name = canonicalize_name(project)
    rows = tuple(r for r in page.all_rows() if r[REASON] is None and
                 classify_filename(r[FILENAME]) is None
                 and project_of(r[FILENAME]) == name)
    return PageRows(rows=rows, anchors=len(rows), problem=page.problem)
