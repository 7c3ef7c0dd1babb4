"""What identifies the code a remembered result came from: a resolution
(:mod:`stacklock.resolve.memo`) or an install plan (:mod:`stacklock.install.replay`)
is replayed only by the same code."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

__all__ = ["code_stamp"]


@functools.cache
def code_stamp(*libraries: str) -> tuple[Any, ...]:
    """Size and mtime of every file of the stacklock package (its data files
    too), and of each of ``libraries``' ``__init__.py`` (an upgrade replaces
    it): an edit or an upgrade changes the stamp."""
    stamp: list[Any] = []
    root = Path(__file__).resolve().parent
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".json", ".toml")):
                st = os.stat(os.path.join(folder, name))
                stamp.append((folder[len(str(root)):], name, st.st_size,
                              st.st_mtime_ns))
    from importlib.machinery import PathFinder  # loaded at start-up already

    for name in libraries:
        spec = PathFinder.find_spec(name)
        if spec is not None and spec.origin:
            st = os.stat(spec.origin)
            stamp.append((name, st.st_size, st.st_mtime_ns))
    return tuple(stamp)
