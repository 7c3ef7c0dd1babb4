"""The lock: a PEP 751 ``pylock.<profile>.toml`` plus stacklock's own tables.

One model (:class:`Lock`, over ``packaging.pylock``), one reader
(:func:`load_lock` / :func:`parse_lock`), one writer (:func:`render_lock` /
:func:`dump_lock`), and :func:`make_lock` from a resolution. ``[tool.stacklock]``
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
    from stacklock.lock.make import default_lock_path, make_lock
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
    "default_lock_path",
    "dump_lock",
    "load_lock",
    "make_lock",
    "parse_lock",
    "parse_lock_document",
    "render_lock",
    "wheel_sha256",
    "wheel_tags",
]


_LAZY = {"default_lock_path": "make", "make_lock": "make",
         "dump_lock": "write", "render_lock": "write"}


def __getattr__(name: str) -> Any:
    """The writers load on first use: ``make_lock`` imports the resolver and
    ``dump_lock`` tomlkit, which readers of a lock (install, validate) never need."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"stacklock.lock.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
