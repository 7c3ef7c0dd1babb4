"""Install's first step: read the lock once and check it can be installed.

Any PEP 751 lock is read by :func:`stacklock.lock.load_lock` (packaging checks
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


def read_installable(path: Path) -> Lock:
    """The lock at ``path`` (see the module doc)."""
    from stacklock.lock import load_lock

    return load_lock(path)


def python_request(lock: Lock) -> str | None:
    """What to ask ``uv python find`` for: the target's python, else the range."""
    if lock.target is not None:
        return lock.target.python
    return str(lock.requires_python) if lock.requires_python else None
