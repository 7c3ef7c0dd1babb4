"""What validate needs from a lock, read with ``packaging.pylock`` plus the
``[tool.stacklock]`` table (DESIGN.md allows readers to skip ``stacklock.lock``).

``Pylock.from_dict`` validates the PEP 751 part strictly; the stacklock table is read
only for the keys validate uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name

from stacklock.errors import LockError
from stacklock.lockfile import read_lock_file

if TYPE_CHECKING:
    from pathlib import Path

    from packaging.version import Version

__all__ = ["LockView", "LockedPackage", "load_lock_view"]


@dataclass(frozen=True, kw_only=True)
class LockedPackage:
    name: NormalizedName
    version: Version | None
    wheels: tuple[tuple[str, str | None], ...] = ()   # (filename, sha256)
    cuda: str | None = None                           # [packages.tool.stacklock] cuda


@dataclass(frozen=True, kw_only=True)
class LockView:
    path: str
    profile: str | None = None
    packages: dict[NormalizedName, LockedPackage] = field(default_factory=dict)
    overrides: tuple[Requirement, ...] = ()
    gpu_arch: tuple[str, ...] = ()
    cuda: dict[str, Any] = field(default_factory=dict)   # [tool.stacklock.cuda]
    validate: dict[str, Any] = field(default_factory=dict)

    def package(self, name: str) -> LockedPackage | None:
        return self.packages.get(canonicalize_name(name))


def load_lock_view(path: str | Path) -> LockView:
    where = str(path)
    lockfile = read_lock_file(path)
    data, pylock, tool = lockfile.data, lockfile.pylock, lockfile.stacklock or {}
    packages: dict[NormalizedName, LockedPackage] = {}
    raw_packages = data.get("packages", [])
    for i, pkg in enumerate(pylock.packages):
        extra = raw_packages[i].get("tool", {}).get("stacklock", {})
        wheels = tuple(
            (w.name or "", (w.hashes or {}).get("sha256")) for w in (pkg.wheels or ())
        )
        cuda = extra.get("cuda") if isinstance(extra, dict) else None
        packages[canonicalize_name(pkg.name)] = LockedPackage(
            name=canonicalize_name(pkg.name), version=pkg.version, wheels=wheels,
            cuda=str(cuda) if cuda is not None else None,
        )
    overrides: list[Requirement] = []
    for j, text in enumerate(tool.get("overrides", [])):
        try:
            overrides.append(Requirement(text))
        except (InvalidRequirement, TypeError) as exc:
            raise LockError(f"{where}: tool.stacklock.overrides[{j}]: {text!r} is not "
                            f"a PEP 508 requirement: {exc}") from exc
    target = tool.get("target", {})
    arch = target.get("gpu-arch", []) if isinstance(target, dict) else []
    validate = tool.get("validate", {})
    if not isinstance(validate, dict):
        raise LockError(f"{where}: tool.stacklock.validate: expected a table")
    return LockView(
        path=where, profile=tool.get("profile"), packages=packages,
        overrides=tuple(overrides), gpu_arch=tuple(str(a) for a in arch),
        cuda=dict(tool.get("cuda", {})), validate=dict(validate),
    )
