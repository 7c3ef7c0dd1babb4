"""A patch file as stacklock reads it: the files it changes, each a list of hunks.

Pure data, made by :func:`stacklock.patches.read.parse_patch` and applied by
:func:`stacklock.patches.apply.apply_file`. Every line keeps its own line ending
(``\\n`` or ``\\r\\n``), and a line the patch marks "No newline at end of file" has
none, so applying a patch gives the same bytes on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FilePatch", "Hunk", "Patch"]

CONTEXT, REMOVED, ADDED = " ", "-", "+"


@dataclass(frozen=True, kw_only=True)
class Hunk:
    """One ``@@ -a,b +c,d @@`` block: ``lines`` are (kind, text) with kind one
    of ``" "``, ``"-"``, ``"+"``; ``number`` counts from 1 within its file."""

    number: int
    header: str
    source_start: int
    source_length: int
    lines: tuple[tuple[str, str], ...]

    @property
    def source(self) -> list[str]:
        """The lines the file must hold where the hunk applies."""
        return [text for kind, text in self.lines if kind != ADDED]

    @property
    def target(self) -> list[str]:
        """The lines that replace them."""
        return [text for kind, text in self.lines if kind != REMOVED]


@dataclass(frozen=True, kw_only=True)
class FilePatch:
    """The changes to one file; ``path`` is relative to site-packages (the
    ``a/`` and ``b/`` prefixes taken off)."""

    path: str
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True, kw_only=True)
class Patch:
    """A whole patch file: what it changes, its sha256 and size."""

    files: tuple[FilePatch, ...]
    sha256: str
    size: int

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)
