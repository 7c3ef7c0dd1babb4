"""The bytes of a lock file, read once and checked: where every reader of a lock
starts (:func:`stacklock.lock.load_lock`, and ``install`` before anything else
looks at them: its head start, its replay key, its plan and uv's copy are all made
from the same bytes).

Only the standard library and stacklock's errors: install's head start reads a
lock before it loads the lock model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.bounded import Malformed, read_regular
from stacklock.errors import LockError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MAX_LOCK_BYTES", "read_lock_bytes"]

MAX_LOCK_BYTES = 64 << 20  # a CUDA stack's lock is ~0.3 MB


def read_lock_bytes(path: str | Path) -> bytes:
    """The lock file's bytes: a regular file only (a FIFO or a device would block
    or never end), at most :data:`MAX_LOCK_BYTES`; every problem is one LockError
    naming the file."""
    where = str(path)
    try:
        return read_regular(path, limit=MAX_LOCK_BYTES)
    except FileNotFoundError:
        raise LockError(f"{where}: no such lock file",
                        hint="stacklock resolve PROFILE writes "
                        "locks/pylock.PROFILE.toml") from None
    except Malformed as exc:  # not a regular file, or too large for a lock
        raise LockError(f"{where}: {exc}", hint="pass the lock file itself, such "
                        "as pylock.toml") from None
    except OSError as exc:
        raise LockError(f"{where}: cannot read the lock: {exc.strerror or exc}",
                        hint="check the path and its permissions") from None
