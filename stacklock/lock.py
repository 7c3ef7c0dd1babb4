"""The lock: a PEP 751 ``pylock.<profile>.toml`` plus stacklock's own table.

``make_lock`` builds a :class:`Lock` from a resolution, ``dump_lock`` writes it
(tomlkit, keys in the order of docs/DESIGN.md, packages sorted by name, wheels by
filename, atomically replaced), ``load_lock`` reads one back strictly: the file
must be valid PEP 751 (``packaging.pylock``) and its ``[tool.stacklock]
lock-version`` one this stacklock knows. The same inputs always give the same
bytes: nothing in the file depends on the clock or on the order things arrived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomlkit
from packaging.pylock import Pylock, PylockValidationError

from stacklock import __version__
from stacklock._fs import atomic_write_bytes
from stacklock._lock_toml import render_packages
from stacklock.errors import LockError
from stacklock.lockfile import read_lock_file
from stacklock.profile import BUILTIN_DIR
from stacklock.resolve.rules import requirement_text
from stacklock.target import Target
from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from datetime import datetime

    from stacklock.resolve.resolution import Resolution

__all__ = [
    "LOCK_VERSION",
    "Lock",
    "LockWheel",
    "LockedPackage",
    "default_lock_path",
    "dump_lock",
    "load_lock",
    "make_lock",
    "render_lock",
]

LOCK_VERSION = 1


def default_lock_path(profile: str) -> Path:
    return Path("locks") / f"pylock.{profile}.toml"


@dataclass(frozen=True, kw_only=True)
class LockWheel:
    name: str
    url: str
    sha256: str
    size: int | None = None
    upload_time: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "url": self.url}
        if self.size is not None:
            out["size"] = self.size
        if self.upload_time is not None:
            out["upload-time"] = self.upload_time
        out["hashes"] = {"sha256": self.sha256}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockWheel:
        return cls(name=data["name"], url=data["url"], sha256=data["hashes"]["sha256"],
                   size=data.get("size"), upload_time=data.get("upload-time"))


@dataclass(frozen=True, kw_only=True)
class LockedPackage:
    name: str
    version: str
    index: str
    wheels: tuple[LockWheel, ...]
    dependencies: tuple[str, ...] = ()
    index_name: str = ""
    cuda: str | None = None
    hash_source: str = "index"

    @property
    def wheel(self) -> LockWheel:
        return self.wheels[0]

    def to_dict(self) -> dict[str, Any]:
        tool: dict[str, Any] = {"index-name": self.index_name}
        if self.cuda is not None:
            tool["cuda"] = self.cuda
        tool["hash-source"] = self.hash_source
        return {
            "name": self.name,
            "version": self.version,
            "index": self.index,
            "dependencies": [{"name": d} for d in self.dependencies],
            "wheels": [w.to_dict() for w in sorted(self.wheels, key=lambda w: w.name)],
            "tool": {"stacklock": tool},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockedPackage:
        tool = data.get("tool", {}).get("stacklock", {})
        return cls(
            name=data["name"], version=data["version"], index=data.get("index", ""),
            wheels=tuple(LockWheel.from_dict(w) for w in data.get("wheels", [])),
            dependencies=tuple(d["name"] for d in data.get("dependencies", [])),
            index_name=tool.get("index-name", ""), cuda=tool.get("cuda"),
            hash_source=tool.get("hash-source", "index"))


@dataclass(frozen=True, kw_only=True)
class Lock:
    """A lock in memory. ``stacklock`` is the ``[tool.stacklock]`` table as read
    (its typed parts have properties); ``source`` names the profile file."""

    packages: tuple[LockedPackage, ...]
    environments: tuple[str, ...]
    requires_python: str
    stacklock: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def profile(self) -> str:
        return str(self.stacklock.get("profile", ""))

    @property
    def target(self) -> Target:
        return Target.from_dict(self.stacklock.get("target", {}))

    @property
    def cuda(self) -> dict[str, Any] | None:
        return self.stacklock.get("cuda")

    @property
    def validate(self) -> dict[str, Any]:
        return dict(self.stacklock.get("validate", {}))

    def package(self, name: str) -> LockedPackage | None:
        return next((p for p in self.packages if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lock-version": "1.0",
            "environments": list(self.environments),
            "requires-python": self.requires_python,
            "created-by": "stacklock",
            "packages": [p.to_dict() for p in sorted(self.packages,
                                                     key=lambda p: p.name)],
            "tool": {"stacklock": self.stacklock},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "lock") -> Lock:
        """Strict: valid PEP 751 and a known ``[tool.stacklock] lock-version``."""
        try:
            Pylock.from_dict(data)
        except PylockValidationError as exc:
            raise LockError(f"{where}: not a valid PEP 751 lock: {exc}",
                            hint="regenerate it with stacklock resolve") from None
        table = data.get("tool", {}).get("stacklock")
        if not isinstance(table, dict):
            raise LockError(f"{where}: no [tool.stacklock] table",
                            hint="only locks written by stacklock resolve are read")
        version = table.get("lock-version")
        if version != LOCK_VERSION:
            raise LockError(
                f"{where}: tool.stacklock.lock-version {version!r} is not supported "
                f"(this stacklock reads {LOCK_VERSION})",
                hint="upgrade stacklock, or regenerate the lock with this one")
        try:
            packages = tuple(LockedPackage.from_dict(p) for p in data["packages"])
        except (KeyError, TypeError) as exc:
            raise LockError(f"{where}: packages: missing or wrong key {exc}",
                            hint="regenerate it with stacklock resolve") from None
        for pkg in packages:
            if not pkg.wheels:
                raise LockError(f"{where}: package {pkg.name} has no wheel",
                                hint="regenerate it with stacklock resolve")
        return cls(packages=packages, environments=tuple(data.get("environments", ())),
                   requires_python=str(data.get("requires-python", "")),
                   stacklock=dict(table))


def make_lock(resolution: Resolution) -> Lock:
    """The lock for a resolution; every key in the order docs/DESIGN.md shows."""
    profile = resolution.profile
    target = profile.target
    spec = profile.requirements
    table: dict[str, Any] = {
        "lock-version": LOCK_VERSION,
        "profile": profile.name,
        "profile-sha256": profile.sha256,
        "stacklock-version": __version__,
    }
    if spec.exclude_newer is not None:
        table["exclude-newer"] = spec.exclude_newer.strftime("%Y-%m-%dT%H:%M:%SZ")
    table["requirements"] = [str(r) for r in spec.packages]
    applied = resolution.overrides
    used = {a.override for a in applied}
    table["overrides"] = [str(r) for r in spec.overrides
                          if requirement_text(r) in used]
    table["overrides-applied"] = [a.to_dict() for a in applied]
    table["constraints"] = [str(r) for r in spec.constraints]
    if spec.prereleases:
        table["prereleases"] = sorted(spec.prereleases)
    table["target"] = target.to_dict()
    if resolution.variants:  # per-GPU-architecture projects: which, and why
        table["gpu-variants"] = [v.to_dict() for v in resolution.variants]
    table["indexes"] = [{"name": i.name, "url": strip_credentials(i.url)}
                        for i in profile.indexes]
    allow_mixed = list(profile.cuda.allow_mixed)  # reviewed CUDA exceptions
    if resolution.cuda_entry is not None:
        table["cuda"] = {k: v for k, v in resolution.cuda_entry.items()
                         if v is not None}
        if allow_mixed:
            table["cuda"]["allow-mixed"] = allow_mixed
    elif allow_mixed:
        table["allow-mixed"] = allow_mixed
    if profile.validate:
        table["validate"] = profile.validate
    packages = tuple(
        LockedPackage(
            name=p.name, version=str(p.version), index=p.index_url,
            wheels=(LockWheel(name=p.wheel.filename, url=p.wheel.url,
                              sha256=p.wheel.sha256, size=p.wheel.size,
                              upload_time=p.wheel.upload_time),),
            dependencies=tuple(p.dependencies), index_name=p.index_name,
            cuda=p.cuda, hash_source=p.wheel.hash_source)
        for p in resolution.packages)
    python = ".".join(map(str, target.python_minor))
    return Lock(packages=packages, environments=(target.environment_marker(),),
                requires_python=f"=={python}.*", stacklock=table,
                source=_profile_source(profile.path, profile.name))


def render_lock(lock: Lock) -> str:
    """The lock's TOML text, header included.

    tomlkit writes the header and ``[tool.stacklock]``; the ``[[packages]]``
    (hundreds of small tables, most of tomlkit's time) are written by
    :func:`stacklock._lock_toml.render_packages` in tomlkit's exact layout;
    anything of another shape goes through tomlkit whole."""
    data = lock.to_dict()
    packages = render_packages(data["packages"])
    if packages is None:
        return _render_with_tomlkit(lock, data)
    head = tomlkit.document()
    _add_head(head, lock, data)
    tail = tomlkit.document()
    tail["tool"] = _tool_table(data)
    return f"{tomlkit.dumps(head)}\n{packages}{tomlkit.dumps(tail)}"


def _add_head(doc: Any, lock: Lock, data: dict[str, Any]) -> None:
    doc.add(tomlkit.comment(f"generated by stacklock {__version__} from {lock.source}"))
    doc.add(tomlkit.comment(f"regenerate with: stacklock resolve {_argument(lock)}"))
    for key in ("lock-version", "environments", "requires-python", "created-by"):
        doc[key] = data[key]


def _render_with_tomlkit(lock: Lock, data: dict[str, Any]) -> str:
    doc = tomlkit.document()
    _add_head(doc, lock, data)
    packages = tomlkit.aot()
    for pkg in data["packages"]:
        table = tomlkit.table()
        for key in ("name", "version", "index"):
            table[key] = pkg[key]
        table["dependencies"] = _inline_array(pkg["dependencies"])
        wheels = tomlkit.aot()
        for wheel in pkg["wheels"]:
            wt = tomlkit.table()
            for key, value in wheel.items():
                wt[key] = _inline(value) if isinstance(value, dict) else value
            wheels.append(wt)
        table["wheels"] = wheels
        tool = tomlkit.table(is_super_table=True)
        tool["stacklock"] = pkg["tool"]["stacklock"]
        table["tool"] = tool
        packages.append(table)
    doc["packages"] = packages
    doc["tool"] = _tool_table(data)
    return tomlkit.dumps(doc)


def _tool_table(data: dict[str, Any]) -> Any:
    tool = tomlkit.table(is_super_table=True)
    stack = tomlkit.table()
    for key, value in data["tool"]["stacklock"].items():
        if key in ("cuda", "validate"):
            continue
        if key == "target":
            stack[key] = _inline(value)
        elif key in ("indexes", "overrides-applied"):
            stack[key] = _inline_array(value)
        else:
            stack[key] = value
    for key in ("cuda", "validate"):
        if key in data["tool"]["stacklock"]:
            stack[key] = data["tool"]["stacklock"][key]
    tool["stacklock"] = stack
    return tool


def dump_lock(lock: Lock, path: str | Path) -> Path:
    """Write ``lock`` to ``path``, replacing any old file atomically. A lock is
    meant to be committed and shared: readable by all, like any checked-in file."""
    written = atomic_write_bytes(path, render_lock(lock).encode("utf-8"))
    written.chmod(0o644)
    return written


def load_lock(path: str | Path) -> Lock:
    where = str(path)
    lockfile = read_lock_file(path)
    text = lockfile.text
    lock = Lock.from_dict(lockfile.data, where=where)
    header = re.match(r"# generated by stacklock \S+ from (.+)\n", text)
    return Lock(packages=lock.packages, environments=lock.environments,
                requires_python=lock.requires_python, stacklock=lock.stacklock,
                source=header.group(1) if header else f"profile {lock.profile}")


def _inline(value: dict[str, Any]) -> Any:
    table = tomlkit.inline_table()
    table.update(value)
    return table


def _inline_array(items: list[dict[str, Any]]) -> Any:
    array = tomlkit.array()
    for item in items:
        array.append(_inline(item))
    if len(items) > 1:
        array.multiline(True)
    return array


def _profile_source(path: str | None, name: str) -> str:
    if path is None:
        return f"profile {name}"
    p = Path(path).resolve()
    if p.parent == BUILTIN_DIR.resolve():
        return f"profiles/{p.name}"
    return str(path)


def _argument(lock: Lock) -> str:
    if lock.source.startswith("profiles/"):
        return lock.profile
    return lock.source.removeprefix("profile ")
