"""Read any PEP 751 lock into a :class:`LockView`, the part a diff compares.

Strict like every stacklock reader: ``tomllib`` parses, ``packaging.pylock`` validates,
and every problem (a missing file, not TOML, not a PEP 751 lock, an unknown
lock-version, a bad ``[tool.stacklock]``) is a one-line :class:`LockError` naming the
file and the key. uv's ``pylock.toml``, stacklock's locks and snapshots all pass.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from packaging.version import Version

from stacklock.errors import LockError
from stacklock.lockfile import LockFile, parse_lock_file, read_lock_file
from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from packaging.pylock import Package

__all__ = ["LockView", "PackageView", "load_lock_view", "parse_lock_view"]

# Bookkeeping, not the stack: a snapshot's venv path and the names it could not
# trace are facts about the machine, derived from the packages already compared.
_IGNORED_TOOL_KEYS = frozenset(
    {"lock-version", "stacklock-version", "snapshot", "venv", "unknown-origin"}
)
# A snapshot records the toolkit it found under ``toolkit``; a lock the one it
# wants under ``cuda``: the same fact, so they are compared with each other.
_RENAMED_TOOL_TABLES = {"toolkit": "cuda"}
_IGNORED_TOOL_TABLES = frozenset({"validate"})


@dataclass(frozen=True, kw_only=True)
class PackageView:
    """What a diff needs of one ``[[packages]]`` entry."""

    name: str
    version: Version | None
    source: str | None  # identity of a version-less package (vcs commit, archive)
    index_name: str | None
    index_url: str | None
    domain: str | None
    cuda: str | None
    files: Mapping[str, Mapping[str, str]]  # filename -> {algorithm: digest}
    record: str | None  # a snapshot's sha256 of the installed RECORD file
    key_path: str  # "locks/x.toml: packages[3]", for messages

    @property
    def index(self) -> str | None:
        return self.index_name or self.index_url or self.domain


@dataclass(frozen=True, kw_only=True)
class LockView:
    """A validated PEP 751 lock, reduced to what a diff compares."""

    path: str
    created_by: str
    packages: Mapping[str, PackageView]
    stack: Mapping[str, Any] | None  # flattened [tool.stacklock]; None when absent
    snapshot: bool
    warnings: tuple[str, ...] = ()


def load_lock_view(path: str | Path) -> LockView:
    """Read and validate any PEP 751 lock; every problem is a one-line LockError."""
    lockfile = read_lock_file(path)
    return _view(lockfile)


def parse_lock_view(content: bytes, *, path: str) -> LockView:
    """Validate ``content`` (a PEP 751 file) and reduce it to a :class:`LockView`."""
    return _view(parse_lock_file(content, path=path))


def _view(lockfile: LockFile) -> LockView:
    path, pylock = lockfile.path, lockfile.pylock
    warnings = []
    if pylock.lock_version > Version("1.0"):
        warnings.append(
            f"{path}: lock-version {pylock.lock_version} is newer than 1.0; "
            "unknown keys were ignored"
        )
    tool = _tool_table(pylock.tool, path=path, key="tool.stacklock")
    stack = None if tool is None else _read_stack(tool, path=path)
    if stack is not None:
        if pylock.requires_python is not None:
            stack["requires-python"] = str(pylock.requires_python)
        if pylock.environments:
            stack["environments"] = [str(m) for m in pylock.environments]
    snapshot = bool(tool and tool.get("snapshot")) or "snapshot" in pylock.created_by
    return LockView(
        path=path,
        created_by=pylock.created_by,
        packages=_read_packages(pylock.packages, path=path),
        stack=stack,
        snapshot=snapshot,
        warnings=tuple(warnings),
    )


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())


def _tool_table(
    tool: Mapping[str, Any] | None, *, path: str, key: str
) -> Mapping[str, Any] | None:
    if tool is None or "stacklock" not in tool:
        return None
    table = tool["stacklock"]
    if not isinstance(table, dict):
        raise LockError(
            f"{path}: {key}: expected a table, found {type(table).__name__}"
        )
    return table


def _read_stack(tool: Mapping[str, Any], *, path: str) -> dict[str, Any]:
    """[tool.stacklock] flattened; its lock-version was checked by lockfile."""
    flat: dict[str, Any] = {}
    for key, value in tool.items():
        if key in _IGNORED_TOOL_KEYS or key in _IGNORED_TOOL_TABLES:
            continue
        _flatten(_RENAMED_TOOL_TABLES.get(key, key), value, flat)
    return flat


def _flatten(key: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for sub, item in value.items():
            _flatten(f"{key}.{sub}", item, out)
    else:
        out[key] = _plain(value)


def _plain(value: Any) -> Any:
    """TOML values as JSON-able values (dates become ISO strings)."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _read_packages(packages: Sequence[Package], *, path: str) -> dict[str, PackageView]:
    views = [_read_package(p, f"packages[{i}]", path) for i, p in enumerate(packages)]
    counts = Counter(v.name for v in views)
    out: dict[str, PackageView] = {}
    for view, package in zip(views, packages, strict=True):
        key = view.name
        if counts[key] > 1:
            key = f"{key}; {package.marker}" if package.marker else view.key_path
        out[key] = view
    return out


def _read_package(package: Package, key_path: str, path: str) -> PackageView:
    files: dict[str, Mapping[str, str]] = {}
    url = None
    for i, wheel in enumerate(package.wheels or ()):
        name = _file_name(wheel.name, wheel.path, wheel.url)
        if not name:
            raise LockError(f"{path}: {key_path}.wheels[{i}]: no name, path or url")
        files[name] = wheel.hashes
        url = url or wheel.url
    sdist = package.sdist
    if sdist is not None:
        name = _file_name(sdist.name, sdist.path, sdist.url)
        if not name:
            raise LockError(f"{path}: {key_path}.sdist: no name, path or url")
        files[name] = sdist.hashes
        url = url or sdist.url
    if package.archive is not None:
        url = url or package.archive.url
    tool = _tool_table(package.tool, path=path, key=f"{key_path}.tool.stacklock")
    return PackageView(
        name=package.name,
        version=package.version,
        source=_source_identity(package),
        index_name=_opt_str(tool, "index-name"),
        index_url=strip_credentials(package.index) if package.index else None,
        domain=_domain(url),
        cuda=_opt_str(tool, "cuda"),
        files=files,
        record=_opt_str(tool, "record-sha256"),
        key_path=f"{path}: {key_path}",
    )


def _file_name(name: str | None, path: str | None, url: str | None) -> str | None:
    """The file's name as PEP 751 defines it (``name``, else the last part of
    ``path`` or ``url``); split by hand because urllib's parser is the slowest
    step of reading a 600-package lock."""
    if name:
        return name
    where = path or url
    if not where:
        return None
    last = where.partition("#")[0].partition("?")[0].rstrip("/").rpartition("/")[2]
    return unquote(last) if "%" in last else last


def _opt_str(table: Mapping[str, Any] | None, key: str) -> str | None:
    value = None if table is None else table.get(key)
    return None if value is None else str(value)


def _source_identity(package: Package) -> str | None:
    if package.vcs is not None:
        where = package.vcs.url or package.vcs.path or ""
        return f"{strip_credentials(where)}@{package.vcs.commit_id}"
    if package.archive is not None:
        return _hash_text(package.archive.hashes)
    if package.directory is not None:
        return package.directory.path
    return None


def _domain(url: str | None) -> str | None:
    """The registrable-looking tail of a file's host: ``files.pythonhosted.org`` ->
    ``pythonhosted.org``, so mirrors of one CDN do not read as an index move."""
    if not url:
        return None
    host = urlsplit(url).hostname
    if not host:
        return None
    return ".".join(host.split(".")[-2:])


def _hash_text(hashes: Mapping[str, str]) -> str:
    algo = "sha256" if "sha256" in hashes else min(hashes, default="")
    return f"{algo}:{hashes[algo]}" if algo else ""
