"""What a selection from a lock is made for (:mod:`~stacklock.install.selection`):
the interpreter the new venv is built from, and what the user asks of the lock.
Plain data, in a module of their own: the command line and a replayed plan use
them without loading ``packaging.pylock``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.tags import Tag

__all__ = ["Interpreter", "Wanted"]


@dataclass(frozen=True, kw_only=True)
class Interpreter:
    """The python the new venv is built from, as it reports itself."""

    path: str
    version: str
    machine: str
    glibc: tuple[int, int] | None
    marker_env: Mapping[str, str]
    tags: tuple[Tag, ...]


@dataclass(frozen=True, kw_only=True)
class Wanted:
    """What the user asks of the lock: ``--extra``, ``--group`` (None: the
    lock's ``default-groups``), ``--no-build`` and ``--allow-unknown-runfile`` (a
    CUDA runfile whose sha256 is not the catalog's for its release may run)."""

    extras: tuple[str, ...] = ()
    groups: tuple[str, ...] | None = None
    no_build: bool = False
    unknown_runfile: bool = False

    def uv_options(self) -> tuple[str, ...]:
        """The same choice for ``uv pip sync``."""
        return (*(f for e in self.extras for f in ("--extra", e)),
                *(f for g in self.groups or () for f in ("--group", g)))
