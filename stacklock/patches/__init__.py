"""Declared patches: a profile's ``[[patches]]`` applied to locked wheels' files.

One reader of patch files (:mod:`~stacklock.patches.read`: bounded, strict) and
one applier (:mod:`~stacklock.patches.apply`: exact, no fuzz; the RECORD that
tells of it is :mod:`stacklock.record`'s), shared by resolve (which records
the patched files' sha256 in the lock), install (which applies them inside the
new generation), validate, snapshot and the rest. Pure: bytes in, bytes out.
"""

from __future__ import annotations

from stacklock.patches.apply import Applied, apply_file, apply_patches
from stacklock.patches.model import FilePatch, Hunk, Patch
from stacklock.patches.read import check_member_path, load_patch, parse_patch
from stacklock.patches.write import render_file_diff

__all__ = [
    "Applied",
    "FilePatch",
    "Hunk",
    "Patch",
    "apply_file",
    "apply_patches",
    "check_member_path",
    "load_patch",
    "parse_patch",
    "render_file_diff",
]
