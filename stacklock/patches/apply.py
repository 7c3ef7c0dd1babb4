"""Applying a patch to a file's bytes, the same way on every machine.

No fuzz: every context and removed line of a hunk must equal the file's line,
byte for byte, line ending included. A hunk applies where its header says (moved
by what the hunks above added or removed, as ``patch`` does); only when its lines
are not there, it applies where they occur exactly once in the rest of the file,
and the move is reported (``Applied.offsets``). A hunk whose lines occur nowhere,
or more than once, does not apply: :class:`~stacklock.errors.PatchConflictError`
(exit 1) names the package, version, file and hunk, and what the file holds.

The bytes are read as UTF-8 with ``surrogateescape`` and written back the same
way, so a file that is not UTF-8 keeps its exact bytes. A file holding NUL bytes
is binary and refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacklock.errors import PatchConflictError, PatchError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from stacklock.patches.model import FilePatch, Hunk, Patch

__all__ = ["Applied", "apply_file", "apply_patches", "split_lines"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


@dataclass(frozen=True, kw_only=True)
class Applied:
    """A file after its patch: its bytes, and the hunks that applied away from
    their header's line, as (hunk number, lines moved)."""

    data: bytes
    offsets: tuple[tuple[int, int], ...] = ()


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each with its ending (only ``\\n`` ends one)."""
    return _LINE.findall(text)


def apply_file(data: bytes, patch: FilePatch, *, package: str, version: str,
               where: str) -> Applied:
    """``data`` (the file ``patch.path`` of ``package`` ``version``) with every
    hunk of ``patch`` applied; ``where`` names the patch file in errors."""
    if b"\0" in data:
        raise PatchError(f"{package} {version}: {where}: {patch.path} is a binary "
                         "file", hint="patches change text files only")
    lines = split_lines(data.decode("utf-8", "surrogateescape"))
    out: list[str] = []
    pos = 0  # lines of the file consumed
    shift = 0  # how far the hunks above applied from their headers' lines
    offsets: list[tuple[int, int]] = []
    for hunk in patch.hunks:
        source = hunk.source
        stated = hunk.source_start - 1 + shift if source else hunk.source_start + shift
        at = _place(lines, source, stated, pos)
        if at is None:
            raise _conflict(lines, hunk, stated, package=package, version=version,
                            path=patch.path, where=where)
        if at != stated:
            offsets.append((hunk.number, at - stated))
        out.extend(lines[pos:at])
        out.extend(hunk.target)
        pos = at + len(source)
        shift += at - stated  # headers count the file's own lines
    out.extend(lines[pos:])
    if any(not line.endswith("\n") for line in out[:-1]):
        raise PatchConflictError(
            f"{package} {version}: {where}: {patch.path}: the patch leaves a line "
            "without its newline before the end of the file",
            package=package, version=version, path=patch.path,
            hunk=patch.hunks[-1].number,
            hint="check its 'No newline at end of file' markers")
    return Applied(data="".join(out).encode("utf-8", "surrogateescape"),
                   offsets=tuple(offsets))


def _place(lines: list[str], source: list[str], stated: int,
           pos: int) -> int | None:
    """Where the hunk's ``source`` lines are: at ``stated`` when they are
    there, else the one place past ``pos`` holding them (a hunk with no
    source lines only at ``stated``)."""
    n = len(source)
    if pos <= stated <= len(lines) and lines[stated:stated + n] == source:
        return stated
    if not source:
        return None
    first = source[0]
    found = [i for i in range(pos, len(lines) - n + 1)
             if lines[i] == first and lines[i:i + n] == source]
    return found[0] if len(found) == 1 else None


def _conflict(lines: list[str], hunk: Hunk, stated: int, *, package: str,
              version: str, path: str, where: str) -> PatchConflictError:
    """Where the file first differs from what the hunk expects at its line."""
    what = "its lines are nowhere in the file"
    for i, expected in enumerate(hunk.source):
        line = stated + i
        found = lines[line] if 0 <= line < len(lines) else None
        if found != expected:
            shown = "the end of the file" if found is None else repr(_short(found))
            what = (f"line {line + 1} is {shown}, the patch expects "
                    f"{_short(expected)!r}")
            break
    return PatchConflictError(
        f"{package} {version}: {where}: {path}: hunk {hunk.number} ({hunk.header}) "
        f"does not apply: {what}",
        package=package, version=version, path=path, hunk=hunk.number,
        hint=f"rewrite the patch against {package} {version} (stacklock snapshot "
        f"--patches makes one from an edited venv), or pin the version it was "
        f"written for")


def _short(line: str) -> str:
    line = line.rstrip("\n")
    return line if len(line) <= 80 else line[:77] + "..."


def apply_patches(files: Mapping[str, bytes], patches: Sequence[tuple[Patch, str]],
                  *, package: str, version: str) -> tuple[dict[str, bytes], list[str]]:
    """The files ``patches`` change (in order: a later patch sees an earlier
    one's result), from ``files`` (every path the patches name, as the wheel
    holds it); and a note per hunk applied away from its header's line. Each
    patch is ``(patch, where)``, ``where`` naming it in errors."""
    current = dict(files)
    changed: dict[str, bytes] = {}
    notes: list[str] = []
    for patch, where in patches:
        for file in patch.files:
            if file.path not in current:
                raise PatchError(f"{package} {version}: {where}: {file.path} is not "
                                 "a file of the wheel")
            applied = apply_file(current[file.path], file, package=package,
                                 version=version, where=where)
            current[file.path] = changed[file.path] = applied.data
            notes.extend(f"{where}: {file.path}: hunk {n} applied {abs(d)} lines "
                         f"{'below' if d > 0 else 'above'} its header's"
                         for n, d in applied.offsets)
    return changed, notes
