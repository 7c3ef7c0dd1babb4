"""The lock: a PEP 751 ``pylock.<profile>.toml`` plus stacklock's own tables.

One model (:class:`Lock`, over ``packaging.pylock``) and one reader
(:func:`load_lock` / :func:`parse_lock`), exported here; one writer
(:mod:`~stacklock.lock.write`: ``render_lock`` / ``dump_lock``, which load
tomlkit), imported from its module by the code that writes, so that readers of a
lock (install, validate) do not load it. Making a lock from a resolution is the
resolver's (:mod:`stacklock.resolve.lockfile`). ``[tool.stacklock]``
is read once into typed tables (:class:`StackInfo`, :class:`CudaEntry`,
:class:`SnapshotInfo`, :class:`PackageTool`) whose errors name the file and key.
"""

from __future__ import annotations

from stacklock.lock.model import Lock, LockedPackage, wheel_sha256, wheel_tags
from stacklock.lock.read import load_lock, parse_lock, parse_lock_document
from stacklock.lock.tables import (
    LOCK_VERSION,
    CudaEntry,
    CudaNote,
    FoundToolkit,
    LockedArchive,
    LockedIndex,
    PackageTool,
    SnapshotInfo,
    StackInfo,
)

__all__ = [
    "LOCK_VERSION",
    "CudaEntry",
    "CudaNote",
    "FoundToolkit",
    "Lock",
    "LockedArchive",
    "LockedIndex",
    "LockedPackage",
    "PackageTool",
    "SnapshotInfo",
    "StackInfo",
    "load_lock",
    "parse_lock",
    "parse_lock_document",
    "wheel_sha256",
    "wheel_tags",
]

