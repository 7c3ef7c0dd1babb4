"""Which files a lock installs, each copied into the archive once, and the
PEP 503 pages that list them (see the package doc)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from stacklock._fs import cache_dir, file_digest
from stacklock.errors import HashMismatchError, LockError
from stacklock.lockarchive import file_key, filename_of
from stacklock.objectstore import open_object_store
from stacklock.store import ArtifactStore
from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from stacklock.lock import Lock
    from stacklock.objectstore import ObjectStore

__all__ = ["ArchiveResult", "ArchivedFile", "archive_lock", "lock_files",
           "render_archive"]

# any absolute base: only each link's file name and sha256 are read back
_PAGE_BASE = "https://archive.invalid/simple/"


@dataclass(frozen=True, kw_only=True)
class ArchivedFile:
    """One file the lock installs: where it comes from, where it goes."""

    filename: str
    sha256: str
    kind: str
    project: str | None
    size: int | None = None
    url: str | None = None
    path: Path | None = None  # a file beside the lock (PEP 751 ``path``)
    requires_python: str | None = None
    state: str = "planned"

    def to_dict(self) -> dict[str, Any]:
        return {"filename": self.filename, "sha256": self.sha256,
                "size": self.size, "kind": self.kind, "project": self.project,
                "state": self.state}


@dataclass(frozen=True, kw_only=True)
class ArchiveResult:
    lock: Path
    archive: str
    files: tuple[ArchivedFile, ...]
    projects: tuple[str, ...]
    skipped: tuple[str, ...] = field(default_factory=tuple)

    def count(self, state: str) -> int:
        return sum(f.state == state for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"lock": str(self.lock), "archive": self.archive,
                "files": [f.to_dict() for f in self.files],
                "copied": self.count("copied"), "present": self.count("present"),
                "bytes_copied": sum(f.size or 0 for f in self.files
                                    if f.state == "copied"),
                "projects": list(self.projects), "skipped": list(self.skipped)}


def lock_files(lock: Lock, *, no_toolkit: bool = False
               ) -> tuple[list[ArchivedFile], list[str]]:
    """Every file the lock may install (its patch files too), and what it
    installs that is no file (a vcs checkout, a directory): with its sha256,
    from its URL or its path."""
    from stacklock.lock import wheel_sha256

    base = Path(lock.path).parent
    found: dict[str, ArchivedFile] = {}
    skipped: list[str] = []
    for pkg in lock.packages:
        entries: list[tuple[Any, str]] = [(f, "wheel" if f in pkg.wheels else "sdist")
                                          for f in pkg.all_files]
        source = pkg.source
        if source is not None and hasattr(source, "hashes"):
            entries.append((source, "archive"))
        elif source is not None:
            kind = type(source).__name__.removeprefix("Package").lower()
            skipped.append(f"{pkg.name}: a {kind} source, not a file")
        requires = pkg.entry.requires_python
        for entry, kind in entries:
            sha = wheel_sha256(entry)
            where = entry.url or entry.path
            if sha is None or where is None:
                raise LockError(f"{lock.path}: {pkg.name}: a file without a sha256 "
                                "or a url cannot be archived",
                                hint="archive a lock whose files are hashed")
            name = (entry.filename if kind != "archive" else filename_of(where))
            found.setdefault(sha, ArchivedFile(
                filename=name, sha256=sha, kind=kind, project=str(pkg.name),
                size=entry.size, url=entry.url,
                path=base / entry.path if entry.path and not entry.url else None,
                requires_python=str(requires) if requires else None))
        for patch in pkg.tool.patches:  # beside the lock; no index page lists them
            found.setdefault(patch.sha256, ArchivedFile(
                filename=PurePosixPath(patch.path).name, sha256=patch.sha256,
                kind="patch", project=None, size=patch.size,
                path=base / patch.path))
    cuda = lock.cuda
    if cuda is not None and cuda.source == "runfile" and not no_toolkit:
        if not (cuda.url and cuda.sha256):
            raise LockError(f"{lock.path}: tool.stacklock.cuda has no url or sha256")
        found.setdefault(cuda.sha256, ArchivedFile(
            filename=filename_of(cuda.url), sha256=cuda.sha256, kind="runfile",
            project=None, size=cuda.size, url=cuda.url))
    return sorted(found.values(), key=lambda f: (f.kind, f.filename)), skipped


def _local(item: ArchivedFile, store: ArtifactStore, http: httpx.Client,
           on_download: Callable[[str, int, int | None], None] | None) -> Path:
    """The file's bytes on this machine, checked against its sha256."""
    if item.path is not None:
        actual = file_digest(item.path)
        if actual != item.sha256:
            raise HashMismatchError(url=str(item.path), expected=item.sha256,
                                    actual=actual)
        return item.path
    assert item.url is not None

    def progress(done: int, total: int | None) -> None:
        if on_download is not None:
            on_download(item.filename, done, total)

    path, _ = store.fetch(http, item.url, expected_sha256=item.sha256,
                          size=item.size, progress=progress, filename=item.filename)
    return path


def render_project_page(project: str, entries: dict[tuple[str, str], str | None]
                        ) -> bytes:
    """A PEP 503 project page: ``(filename, sha256) -> requires-python``."""
    lines = ["<!DOCTYPE html>", "<html>", "  <body>",
             f"    <h1>Links for {html.escape(project)}</h1>"]
    for (name, sha), requires in sorted(entries.items()):
        href = f"../../{quote(file_key(sha, name))}#sha256={sha}"
        attr = (f' data-requires-python="{html.escape(requires)}"'
                if requires else "")
        lines.append(f'    <a href="{href}"{attr}>{html.escape(name)}</a><br/>')
    lines += ["  </body>", "</html>", ""]
    return "\n".join(lines).encode("utf-8")


def render_root_page(projects: list[str]) -> bytes:
    lines = ["<!DOCTYPE html>", "<html>", "  <body>"]
    lines += [f'    <a href="{quote(p)}/">{html.escape(p)}</a><br/>'
              for p in sorted(projects)]
    lines += ["  </body>", "</html>", ""]
    return "\n".join(lines).encode("utf-8")


def _page_entries(objects: ObjectStore, project: str
                  ) -> dict[tuple[str, str], str | None]:
    """The files a project page of the archive lists already (read with the
    index's own page reader)."""
    from stacklock.index.pages import parse_html_page

    body = objects.read(f"simple/{project}/index.html")
    if body is None:
        return {}
    page = parse_html_page(body, f"{_PAGE_BASE}{project}/")
    links = [*page.links, *(s.link for s in page.skipped)]
    return {(link.filename, link.sha256): link.requires_python
            for link in links if link.sha256}


def _write_index(objects: ObjectStore, files: list[ArchivedFile]) -> list[str]:
    """Each touched project page, merged with what it listed; then the root."""
    by_project: dict[str, dict[tuple[str, str], str | None]] = {}
    for item in files:
        if item.project is not None:
            by_project.setdefault(item.project, {})[
                (item.filename, item.sha256)] = item.requires_python
    for project, entries in sorted(by_project.items()):
        merged = {**_page_entries(objects, project), **entries}
        objects.write(f"simple/{project}/index.html",
                      render_project_page(project, merged), "text/html")
    projects = sorted({*objects.children("simple/"), *by_project})
    objects.write("simple/index.html", render_root_page(projects), "text/html")
    return sorted(by_project)


def archive_lock(
    lock_path: str | Path,
    dest: str,
    *,
    no_toolkit: bool = False,
    http: httpx.Client | None = None,
    cache: Path | None = None,
    on_download: Callable[[str, int, int | None], None] | None = None,
) -> ArchiveResult:
    """Copy every file ``lock_path`` installs into the archive at ``dest``
    (fetched into the artifact store first where it is not there, each checked
    against the lock's sha256), then write the index pages."""
    from stacklock.http import Credentials, make_http_client
    from stacklock.lock import load_lock

    lock = load_lock(lock_path)
    objects = open_object_store(dest)
    files, skipped = lock_files(lock, no_toolkit=no_toolkit)
    store = ArtifactStore((cache or cache_dir()) / "artifacts")
    indexes = lock.stack.indexes if lock.stack is not None else ()
    own_http = http or make_http_client(timeout=60.0, credentials=Credentials(
        (index.name, index.url) for index in indexes))
    done: list[ArchivedFile] = []
    try:
        for item in files:
            key = file_key(item.sha256, item.filename)
            there = objects.size(key)
            if there is not None and item.size in (None, there):
                done.append(_with(item, state="present", size=there))
                continue
            local = _local(item, store, own_http, on_download)
            objects.put(key, local)
            done.append(_with(item, state="copied", size=local.stat().st_size))
    finally:
        if http is None:
            own_http.close()
    projects = _write_index(objects, done)
    return ArchiveResult(lock=Path(lock_path), archive=objects.url,
                         files=tuple(done), projects=tuple(projects),
                         skipped=tuple(skipped))


def _with(item: ArchivedFile, **changes: Any) -> ArchivedFile:
    from dataclasses import replace

    return replace(item, **changes)


def render_archive(result: ArchiveResult) -> str:
    copied = [f for f in result.files if f.state == "copied"]
    size = sum(f.size or 0 for f in copied)
    lines = [f"archived {result.lock.name} into {result.archive}: "
             f"{counted(len(copied), 'file')} copied ({size / 1e6:.1f} MB), "
             f"{result.count('present')} already there; index: "
             f"{result.archive}/simple/ ({counted(len(result.projects), 'project')})"]
    lines += [f"  copied {f.filename}" for f in copied]
    lines += [f"  skipped {s}" for s in result.skipped]
    return "\n".join(lines)
