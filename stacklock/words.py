"""Counts in English: ``1 file``, ``3 files``, never ``3 file(s)``."""

from __future__ import annotations

__all__ = ["counted", "plural"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``word`` for one, else ``many`` (default: ``word`` + s)."""
    return word if n == 1 else (many or f"{word}s")


def counted(n: int, word: str, many: str | None = None) -> str:
    """``3 files``, ``1 file``; ``many`` where the plural is not ``word`` + s
    (``counted(2, "library", "libraries")``)."""
    return f"{n} {plural(n, word, many)}"
