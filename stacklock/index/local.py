"""Indexes that are folders or files on this machine (``file://`` or a path).

A folder may be a simple index (``<project>/index.html``), a find-links folder
of wheels and sdists (listed, each file hashed), or one HTML page of links. Read
from disk every time: there is nothing to cache and no freshness to keep.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from stacklock._fs import file_digest
from stacklock.errors import IndexUnreadable
from stacklock.index.pages import (
    PageRows,
    only_project_rows,
    project_of,
    rows_from_html,
    rows_from_listing,
)
from stacklock.urls import file_url_path, redact_url

if TYPE_CHECKING:
    from stacklock.profile import IndexSpec

__all__ = ["is_local", "load_local_rows", "local_path", "local_project_names"]

_DIST_SUFFIXES = (".whl", ".tar.gz", ".zip")


def is_local(url: str) -> bool:
    """A ``file://`` URL or a path, not something to ask over HTTP."""
    scheme = urlsplit(url).scheme.lower()
    return scheme == "file" or scheme == "" or (len(scheme) == 1 and os.name == "nt")


def local_path(url: str) -> Path:
    """The file or folder a ``file://`` URL or a plain path names."""
    return file_url_path(url) or Path(url).expanduser()


def _file_url(path: Path) -> str:
    from urllib.request import pathname2url

    return "file://" + pathname2url(str(path.resolve()))


def load_local_rows(index: IndexSpec, project: str) -> PageRows:
    """What the local index offers for ``project`` (a normalized name)."""
    root = local_path(index.url)
    if not root.exists():
        raise IndexUnreadable("local index folder does not exist",
                          index=index.name, url=redact_url(index.url),
                          hint="check the path, or give an https index URL")
    if root.is_file():
        page = rows_from_html(root.read_bytes(), _file_url(root))
        return only_project_rows(page, project)
    for name in dict.fromkeys((project, project.replace("-", "_"))):
        sub = root / name
        if (sub / "index.html").is_file():
            html = sub / "index.html"
            return rows_from_html(html.read_bytes(), _file_url(html))
        if sub.is_dir():
            return _list_folder(sub, project)
    return _list_folder(root, project)


def local_project_names(index: IndexSpec) -> list[str]:
    """The projects a local index holds: its page's files, its folders, the
    files in it."""
    root = local_path(index.url)
    if root.is_file():
        page = rows_from_html(root.read_bytes(), _file_url(root))
        files = [f for f in page.filenames() if f]
        return sorted({n for f in files if (n := project_of(f))})
    found = set()
    for path in root.iterdir():
        if path.is_dir():
            found.add(path.name)
        elif path.name.endswith(_DIST_SUFFIXES) and (name := project_of(path.name)):
            found.add(name)
    return sorted(found)


def _list_folder(folder: Path, project: str) -> PageRows:
    entries = []
    for path in sorted(folder.iterdir()):
        if not path.is_file() or not path.name.endswith(_DIST_SUFFIXES):
            continue
        if project_of(path.name) != project:
            continue
        entries.append((path.name, path.stat().st_size, file_digest(path)))
    return rows_from_listing(entries, _file_url(folder))
