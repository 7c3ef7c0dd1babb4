"""Writing a patch: the unified diff of a file's bytes before and after an edit,
as ``diff -u`` writes it ("No newline at end of file" markers included), which
:func:`stacklock.patches.apply.apply_file` gives back byte for byte."""

from __future__ import annotations

import difflib

from stacklock.patches.apply import split_lines

__all__ = ["render_file_diff"]


def render_file_diff(path: str, old: bytes, new: bytes, *, context: int = 3) -> str:
    """The ``--- a/PATH`` ``+++ b/PATH`` section turning ``old`` into ``new``
    (bytes that are not UTF-8 kept with ``surrogateescape``); "" when equal."""
    before = split_lines(old.decode("utf-8", "surrogateescape"))
    after = split_lines(new.decode("utf-8", "surrogateescape"))
    out = []
    for line in difflib.unified_diff(before, after, f"a/{path}", f"b/{path}",
                                     n=context):
        out.append(line if line.endswith("\n")
                   else line + "\n\\ No newline at end of file\n")
    return "".join(out)
