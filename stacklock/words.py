"""Counts in English: ``1 file``, ``3 files``, never ``3 file(s)``; lists cut
short as ``a, b, c and 4 more``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["counted", "first", "plural"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``word`` for one, else ``many`` (default: ``word`` + s)."""
    return word if n == 1 else (many or f"{word}s")


def counted(n: int, word: str, many: str | None = None) -> str:
    """``3 files``, ``1 file``; ``many`` where the plural is not ``word`` + s
    (``counted(2, "library", "libraries")``)."""
    return f"{n} {plural(n, word, many)}"


def first(items: Sequence[str], shown: int, *, sep: str = ", ") -> str:
    """The first ``shown`` of ``items`` joined by ``sep``, then how many more:
    ``a, b, c and 4 more``; all of them when they are no more than ``shown``."""
    more = len(items) - shown
    return sep.join(items[:shown]) + (f" and {more} more" if more > 0 else "")
