"""The lock: a PEP 751 ``pylock.<profile>.toml`` plus stacklock's own tables.

One model (:class:`Lock`, over ``packaging.pylock``), one reader
(:func:`load_lock` / :func:`parse_lock`) and one writer (:func:`render_lock` /
:func:`dump_lock`); making a lock from a resolution is the resolver's
(:mod:`stacklock.resolve.lockfile`). ``[tool.stacklock]``
is read once into typed tables (:class:`StackInfo`, :class:`CudaEntry`,
:class:`SnapshotInfo`, :class:`PackageTool`) whose errors name the file and key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stacklock.lock.model import Lock, LockedPackage, wheel_sha256, wheel_tags
from stacklock.lock.read import load_lock, parse_lock, parse_lock_document
from stacklock.lock.tables import (
    LOCK_VERSION,
    CudaEntry,
    CudaNote,
    FoundToolkit,
    LockedIndex,
    PackageTool,
    SnapshotInfo,
    StackInfo,
)

if TYPE_CHECKING:
    from stacklock.lock.write import dump_lock, render_lock

__all__ = [
    "LOCK_VERSION",
    "CudaEntry",
    "CudaNote",
    "FoundToolkit",
    "Lock",
    "LockedIndex",
    "LockedPackage",
    "PackageTool",
    "SnapshotInfo",
    "StackInfo",
    "dump_lock",
    "load_lock",
    "parse_lock",
    "parse_lock_document",
    "render_lock",
    "wheel_sha256",
    "wheel_tags",
]


_LAZY = {"dump_lock": "write", "render_lock": "write"}


def __getattr__(name: str) -> Any:
    """The writers load on first use: ``dump_lock`` imports tomlkit, which
    readers of a lock (install, validate) never need."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"stacklock.lock.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
