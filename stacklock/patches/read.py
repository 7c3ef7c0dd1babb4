"""The one reader of patch files: bounded, strict, one error type.

A ``[[patches]]`` file is a unified diff as ``git diff`` or ``diff -ru a b``
writes it, its paths relative to site-packages behind the ``a/`` and ``b/``
prefixes. ``unidiff`` (a well-kept parser of that grammar: git headers, modes,
binary markers, "No newline at end of file") reads it; this module bounds what it
is given (size, line length, files, hunks) and refuses what stacklock will not
apply: a binary change, a new, deleted or renamed file, a mode change, a symlink,
a path that is absolute, holds ``..`` or leaves the ``a/``/``b/`` form, a file
named twice, a patch saved with CRLF line endings. Every refusal is one
:class:`~stacklock.errors.PatchError` naming the file (exit 2).

Bytes that are not UTF-8 are kept as they are (``surrogateescape``), so a patch
of a Latin-1 file still gives that file's exact bytes.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from stacklock.bounded import Malformed, read_regular
from stacklock.errors import PatchError
from stacklock.patches.model import ADDED, CONTEXT, REMOVED, FilePatch, Hunk, Patch

if TYPE_CHECKING:
    from unidiff.patch import Hunk as UnidiffHunk
    from unidiff.patch import PatchedFile, PatchSet

__all__ = [
    "MAX_FILES",
    "MAX_HUNKS",
    "MAX_LINE",
    "MAX_PATCH_BYTES",
    "check_member_path",
    "load_patch",
    "parse_patch",
]

MAX_PATCH_BYTES = 4 << 20  # a hand patch is a few KB; snapshot's of a package, more
MAX_LINE = 256 << 10  # one line of the patch
MAX_FILES = 1000
MAX_HUNKS = 10_000  # in the whole patch
_HINT = "write it with `git diff` or `diff -ru a b` (paths relative to site-packages)"
_HEADERS = ("--- ", "+++ ", "@@ ", "diff ")
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def load_patch(path: Path, *, where: str | None = None) -> Patch:
    """The patch file at ``path`` (only a regular file, only up to
    :data:`MAX_PATCH_BYTES`); ``where`` names it in errors (default: ``path``)."""
    name = where or str(path)
    try:
        data = read_regular(path, limit=MAX_PATCH_BYTES)
    except FileNotFoundError:
        raise PatchError(f"{name}: no such patch file",
                         hint="the path is relative to the profile (or the lock)"
                         ) from None
    except Malformed as exc:
        raise PatchError(f"{name}: {exc}: not a patch stacklock applies",
                         hint="name the patch file itself; split a large one, one "
                         "package's files a patch") from None
    except OSError as exc:
        raise PatchError(f"{name}: cannot read the patch: {exc.strerror or exc}",
                         hint="check the path and its permissions") from None
    return parse_patch(data, where=name)


def parse_patch(data: bytes, *, where: str) -> Patch:
    """The patch in ``data`` (a file's bytes; ``where`` names it). Pure."""
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    if len(data) > MAX_PATCH_BYTES:
        raise _fail(where, f"larger than {MAX_PATCH_BYTES >> 20} MiB: not a patch "
                    "stacklock applies", "split it, one package's files a patch")
    if b"\0" in data:
        raise _fail(where, "holds NUL bytes: a binary patch",
                    "patches change text files only")
    text = data.decode("utf-8", "surrogateescape")
    lines = _LINE.findall(text)
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE:
            raise _fail(where, f"line {number} is longer than {MAX_LINE >> 10} KiB")
        if line.startswith(_HEADERS) and line.endswith("\r\n"):
            raise _fail(where, f"line {number} ends in CRLF: the patch was saved "
                        "with Windows line endings", "save it with LF line endings "
                        "(git diff's own); a CRLF file's lines keep theirs")
        if line.startswith("Only in "):
            raise _fail(where, f"line {number}: {line.strip()!r}: a file only one "
                        "side has", "patches change files the wheel holds; "
                        "`diff -ru` with new files needs -N, which stacklock refuses")
    try:
        found = PatchSet(lines)
    except (UnidiffParseError, ValueError, IndexError) as exc:
        raise _fail(where, f"not a unified diff: {exc}", _HINT) from None
    files = _files(found, where)
    return Patch(files=files, sha256=hashlib.sha256(data).hexdigest(),
                 size=len(data))


def _fail(where: str, message: str, hint: str = _HINT) -> PatchError:
    return PatchError(f"{where}: {message}", hint=hint)


def _files(found: PatchSet, where: str) -> tuple[FilePatch, ...]:
    files: list[FilePatch] = []
    hunks = 0
    for patched in found:
        path = _path(patched, where)
        if any(f.path == path for f in files):
            raise _fail(where, f"{path} is changed twice in one patch",
                        "one section per file")
        hunks += len(patched)
        if len(files) >= MAX_FILES or hunks > MAX_HUNKS:
            raise _fail(where, f"more than {MAX_FILES} files or {MAX_HUNKS} hunks")
        files.append(FilePatch(path=path, hunks=_hunks(patched, path, where)))
    if not files:
        raise _fail(where, "changes no file (no '--- a/...' '+++ b/...' section)")
    return tuple(files)


def _path(patched: PatchedFile, where: str) -> str:
    """The path a section changes, refused unless it modifies one text file."""
    source = str(patched.source_file or "")
    target = str(patched.target_file or "")
    shown = target if target not in ("", "/dev/null") else source
    if patched.is_binary_file:
        raise _fail(where, f"{shown}: a binary change", "patches change text files "
                    "only; a patched .so or other binary is refused")
    if "/dev/null" in (source, target):
        what = "adds" if source == "/dev/null" else "deletes"
        raise _fail(where, f"{shown}: {what} a file", "a patch changes files the "
                    "wheel holds; it adds and deletes none")
    modes = {m for m in (patched.source_mode, patched.target_mode) if m is not None}
    if "120000" in modes or "160000" in modes:
        raise _fail(where, f"{shown}: a symlink or submodule", "patches change "
                    "regular text files only")
    if len(modes) > 1:
        raise _fail(where, f"{shown}: changes the file mode "
                    f"({' -> '.join(sorted(modes))})", "patches change file contents "
                    "only")
    if not source.startswith("a/") or not target.startswith("b/"):
        raise _fail(where, f"{shown}: paths must be a/PATH and b/PATH")
    if source[2:] != target[2:]:
        raise _fail(where, f"renames {source[2:]} to {target[2:]}",
                    "patches change files in place; they rename none")
    problem = check_member_path(source[2:])
    if problem:
        raise _fail(where, f"{source[2:]}: {problem}")
    if not len(patched):
        raise _fail(where, f"{source[2:]}: no hunk")
    return source[2:]


def check_member_path(path: str) -> str | None:
    """What is wrong with ``path`` as a file of a package in site-packages
    (absolute, ``..``, quoted, a backslash, a dist-info or ``.data`` file), None
    when nothing is."""
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or path.startswith('"'):
        return "not a plain relative path"
    if "\\" in path or "\0" in path or any(ord(c) < 32 for c in path):
        return "holds a backslash or a control character"
    if any(p in ("..", ".") for p in path.split("/")) or "" in path.split("/"):
        return "holds '..', '.' or an empty part: outside the package"
    top = parts[0]
    if top.endswith((".dist-info", ".data")):
        return (f"in {top}/: an installer's file or one installed outside "
                "site-packages; patches change the package's own files")
    return None


def _hunks(patched: PatchedFile, path: str, where: str) -> tuple[Hunk, ...]:
    out: list[Hunk] = []
    last_end = 0
    for number, hunk in enumerate(patched, 1):
        header = (f"@@ -{hunk.source_start},{hunk.source_length} "
                  f"+{hunk.target_start},{hunk.target_length} @@")
        if hunk.source_start < last_end:
            raise _fail(where, f"{path}: hunk {number} ({header}) starts before the "
                        "one above ends", "hunks in order, as diff writes them")
        last_end = hunk.source_start + hunk.source_length
        out.append(Hunk(number=number, header=header,
                        source_start=hunk.source_start,
                        source_length=hunk.source_length,
                        lines=_lines(hunk, path, number, where)))
    return tuple(out)


def _lines(hunk: UnidiffHunk, path: str, number: int,
           where: str) -> tuple[tuple[str, str], ...]:
    """The hunk's lines; "\\ No newline at end of file" takes the line ending
    off the line before it, which must then end its side of the file."""
    lines: list[list[str]] = []
    for line in hunk:
        kind = line.line_type
        if kind == "\\":
            if not lines or not lines[-1][1].endswith("\n"):
                raise _fail(where, f"{path}: hunk {number}: a misplaced 'No newline "
                            "at end of file'")
            lines[-1][1] = lines[-1][1].removesuffix("\n")
            continue
        if kind not in (CONTEXT, REMOVED, ADDED):
            continue  # an empty line after the hunk (unidiff keeps it)
        lines.append([kind, line.value])
    for side in ((CONTEXT, REMOVED), (CONTEXT, ADDED)):
        texts = [t for k, t in lines if k in side]
        if any(not t.endswith("\n") for t in texts[:-1]):
            raise _fail(where, f"{path}: hunk {number}: 'No newline at end of file' "
                        "before the last line of a side")
    return tuple((k, t) for k, t in lines)
