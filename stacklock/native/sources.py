"""A wheel's Python sources as the import closure needs them, read once.

Read only for a package the check found something in: its ``.py`` members and
``top_level.txt`` by range reads (:func:`stacklock.metadata.members.
read_wheel_files`), each module parsed (:func:`stacklock.native.imports.
parse_module`), and the result cached by the wheel's sha256 under
``<cache>/native-imports/``: a second check reads nothing. A wheel that cannot be
read (offline and not cached, a broken zip) has no facts: its findings then all
count as breaking its import, as before this was known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stacklock._fs import atomic_write_bytes
from stacklock.bounded import Malformed, parse_json, read_regular
from stacklock.errors import StacklockError
from stacklock.native.imports import (
    ModuleFacts,
    module_name,
    parse_module,
    top_level_modules,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import httpx

    from stacklock.native.wheel import NativeWheel

__all__ = ["ImportFacts", "SourceReader"]

_FORMAT = 1
_ENTRY_LIMIT = 64 << 20  # a cached entry larger than this is not ours


@dataclass(frozen=True, kw_only=True)
class ImportFacts:
    """What a wheel's Python modules import (by dotted name), and its
    top-level modules."""

    sha256: str
    top_level: tuple[str, ...]
    modules: Mapping[str, ModuleFacts]

    def to_dict(self) -> dict[str, Any]:
        return {"format": _FORMAT, "sha256": self.sha256,
                "top-level": list(self.top_level),
                "modules": {name: {"imports": list(m.imports),
                                   "literals": list(m.literals)}
                            for name, m in sorted(self.modules.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ImportFacts:
        modules = data["modules"]
        return cls(sha256=str(data["sha256"]),
                   top_level=tuple(str(t) for t in data["top-level"]),
                   modules={str(name): ModuleFacts(
                       imports=tuple(str(i) for i in m["imports"]),
                       literals=tuple(str(s) for s in m["literals"]))
                       for name, m in modules.items()})


def facts_of_sources(sha256: str, sources: Mapping[str, bytes],
                     names: frozenset[str] | set[str]) -> ImportFacts:
    """The facts of the ``.py`` members in ``sources`` (path -> bytes), among
    the wheel's member ``names``."""
    top_txt = next((data.decode("utf-8", "replace")
                    for path, data in sorted(sources.items())
                    if path.endswith(".dist-info/top_level.txt")), None)
    modules = {}
    for path, data in sources.items():
        name = module_name(path) if path.endswith(".py") else None
        if name is not None:
            modules[name] = parse_module(data, name,
                                         is_package=path.endswith("/__init__.py"))
    return ImportFacts(sha256=sha256.lower(),
                       top_level=tuple(top_level_modules(names, top_txt)),
                       modules=modules)


def _is_source(name: str) -> bool:
    return (name.endswith(".py") and ".dist-info/" not in name) or \
        name.endswith(".dist-info/top_level.txt")


class SourceReader:
    """Reads and caches :class:`ImportFacts` of wheels (see the module
    docstring); ``bytes_read`` counts what came over the network."""

    def __init__(self, http: httpx.Client, *, cache_dir: Path,
                 offline: bool = False) -> None:
        from stacklock.store import ArtifactStore

        self._http = http
        self._dir = Path(cache_dir) / "native-imports"
        self._store = ArtifactStore(Path(cache_dir) / "artifacts")
        self._offline = offline
        self._memo: dict[str, ImportFacts | None] = {}
        self.bytes_read = 0

    def facts(self, wheel: NativeWheel) -> ImportFacts | None:
        """The wheel's import facts; None where they cannot be had."""
        key = wheel.sha256.lower()
        if key not in self._memo:
            self._memo[key] = self._cached(key) or self._read(wheel)
        return self._memo[key]

    def remember(self, facts: ImportFacts) -> None:
        self._memo[facts.sha256] = facts
        atomic_write_bytes(self._entry(facts.sha256),
                           json.dumps(facts.to_dict()).encode(), durable=False)

    def _entry(self, sha256: str) -> Path:
        return self._dir / f"{sha256}.json"

    def _cached(self, sha256: str) -> ImportFacts | None:
        try:
            data = parse_json(read_regular(self._entry(sha256), limit=_ENTRY_LIMIT))
            if data.get("format") == _FORMAT and data.get("sha256") == sha256:
                return ImportFacts.from_dict(data)
        except (OSError, Malformed, KeyError, TypeError, AttributeError):
            pass
        return None

    def _read(self, wheel: NativeWheel) -> ImportFacts | None:
        from stacklock.metadata.members import read_wheel_files

        try:
            found = read_wheel_files(
                self._http, filename=wheel.filename, url=wheel.url,
                sha256=wheel.sha256, size=wheel.size, wanted=_is_source,
                store=self._store, offline=self._offline)
        except StacklockError:
            return None  # its findings stay blocking
        self.bytes_read += found.bytes_read
        facts = facts_of_sources(wheel.sha256, found.files, set(found.names))
        self.remember(facts)
        return facts
