"""Install's first step: read the lock once and check it can be installed.

The lock's bytes are read once, checked (:func:`stacklock.lockbytes.read_lock_bytes`:
a regular file, bounded), before anything else looks at them; the head start, the
replay key, the plan, uv's copy and the generation's copy are all made from those
bytes. Any PEP 751 lock is parsed by :func:`stacklock.lock.parse_lock` (packaging checks
that each package has a source: wheels, an sdist, a vcs, a directory or an
archive, with ``version`` optional where the PEP allows). What install needs of
the files it picks (a sha256 uv checks) is checked once they are picked
(:func:`~stacklock.install.selection.refuse_unhashed`): a file the host never
installs does not refuse the lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from stacklock.lock import Lock

__all__ = ["python_request", "read_installable"]


def read_installable(path: Path, content: bytes | None = None) -> Lock:
    """The lock at ``path``, parsed from ``content`` (its bytes as install read
    them once), or from a checked read of the file when not given."""
    from stacklock.lock.read import parse_lock
    from stacklock.lockbytes import read_lock_bytes

    return parse_lock(read_lock_bytes(path) if content is None else content,
                      path=str(path))


def python_request(lock: Lock) -> str | None:
    """What to ask ``uv python find`` for: the target's python, else the range."""
    if lock.target is not None:
        return lock.target.python
    return str(lock.requires_python) if lock.requires_python else None
