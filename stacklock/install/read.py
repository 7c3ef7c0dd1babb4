"""Install's first step: read the lock once and check it can be installed.

Any PEP 751 lock is read by :func:`stacklock.lock.load_lock`; install adds what
only it needs: every package pinned to a version, every package with a wheel
or the sdist uv builds on the target, every file with a sha256 (uv installs
with ``--require-hashes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.errors import LockError

if TYPE_CHECKING:
    from pathlib import Path

    from stacklock.lock import Lock

__all__ = ["python_request", "read_installable"]


def read_installable(path: Path) -> Lock:
    """The lock at ``path``, refused with a one-line error when uv could not
    install it hash-checked."""
    from stacklock.lock import load_lock, wheel_sha256

    lock = load_lock(path)
    for i, pkg in enumerate(lock.packages):
        where = f"{path}: packages[{i}] ({pkg.name})"
        if pkg.version is None:
            raise LockError(f"{where}: no version", hint="re-resolve the lock")
        if not pkg.files:
            raise LockError(f"{where}: neither a wheel nor an sdist",
                            hint="re-resolve the lock")
        for j, file in enumerate(pkg.files):
            if wheel_sha256(file) is None:
                part = "sdist" if pkg.sdist is not None else f"wheels[{j}]"
                raise LockError(f"{where}.{part}: no sha256 hash",
                                hint="re-resolve: stacklock hashes every file it "
                                "locks")
    return lock


def python_request(lock: Lock) -> str | None:
    """What to ask ``uv python find`` for: the target's python, else the range."""
    if lock.target is not None:
        return lock.target.python
    return str(lock.requires_python) if lock.requires_python else None
