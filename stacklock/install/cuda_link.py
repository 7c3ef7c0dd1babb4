"""``/usr/local/cuda`` as it was: read before the runfile runs, put back after.

NVIDIA's runfile may create or re-point ``/usr/local/cuda`` at the toolkit it
installs, even with ``--toolkitpath`` elsewhere; a machine's other users and its
build scripts follow that link. stacklock moves it only with ``--link-cuda`` (after
the install, :func:`stacklock.install.toolkit.link_cuda`), so whatever the runfile
did to it is undone: a link it created is removed, a link it moved points where it
pointed before. A real directory is never removed or recreated; a change to one is
reported instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["LinkState", "point_link", "read_link_state", "restore_link_state"]

ABSENT, SYMLINK, DIRECTORY, FILE = "absent", "symlink", "directory", "file"


@dataclass(frozen=True, kw_only=True)
class LinkState:
    path: Path
    kind: str                    # absent | symlink | directory | file
    target: str | None = None    # a symlink's target, as written
    inode: tuple[int, int] | None = None  # (device, inode) of what is there

    def describe(self) -> str:
        if self.kind == SYMLINK:
            return f"a symlink to {self.target}"
        return "absent" if self.kind == ABSENT else f"a {self.kind}"


def read_link_state(path: Path) -> LinkState:
    """What is at ``path`` now, without following a symlink."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return LinkState(path=path, kind=ABSENT)
    inode = (st.st_dev, st.st_ino)
    if path.is_symlink():
        return LinkState(path=path, kind=SYMLINK, target=os.readlink(path),
                         inode=inode)
    kind = DIRECTORY if path.is_dir() else FILE
    return LinkState(path=path, kind=kind, inode=inode)


def point_link(path: Path, target: str) -> None:
    """An atomic symlink swap: ``path`` -> ``target``."""
    tmp = path.with_name(f".{path.name}.stacklock-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, path)


def restore_link_state(before: LinkState) -> str | None:
    """Undo what happened to ``before.path`` since ``before`` was read; a note
    saying what was found and done, or None when nothing changed."""
    now = read_link_state(before.path)
    path = before.path
    if before.kind == SYMLINK and now.kind == SYMLINK and now.target == before.target:
        return None
    if before.kind != SYMLINK and now.kind == before.kind \
            and now.inode == before.inode:
        return None
    found = f"the runfile left {path} {now.describe()} (it was {before.describe()})"
    if before.kind == ABSENT and now.kind == SYMLINK:
        path.unlink()
        return f"{found}; removed (only --link-cuda sets it)"
    if before.kind == SYMLINK and now.kind in (ABSENT, SYMLINK):
        assert before.target is not None
        point_link(path, before.target)
        return f"{found}; put back to {before.target} (only --link-cuda moves it)"
    return f"{found}; not put back: stacklock never removes or recreates a directory"
