"""Diff two PEP 751 locks: what moved, not which lines changed.

Reviewers of a new GPU stack ask "torch 2.9.1+cu128 became 2.11.0+cu130, CUDA 12.8.1
became 13.0.1, the minimum driver rose, three packages now come from another index,
one wheel changed its hash under the same name". This module answers exactly that for
any PEP 751 lock: stacklock's own, uv's ``pylock.toml`` or a ``stacklock snapshot`` of
an installed environment. :mod:`stacklock.lock` reads and validates the files,
:mod:`~stacklock.diff.packages` says what is compared of each package,
:mod:`~stacklock.diff.compare` compares them, :mod:`~stacklock.diff.stack` the
toolkit and stack tables, and :mod:`~stacklock.diff.render` renders the result.

Per package (keyed by normalized name; ``name; marker`` when a lock lists a name twice,
and the entries of one name left over under other markers paired as one when each
side holds one version of it) the change is one of, by precedence:

``added`` / ``removed``
``upgraded`` / ``downgraded``  the version differs beyond its local label
``rebuilt``      same public version, another local label (``cu128`` -> ``cu130``),
                 or, at the very same version, a wheel for the same tags with another
                 build tag
``replaced``     a vcs, directory or archive entry points elsewhere (url + commit, path,
                 hash), compared by that source whether or not it has a version
``moved-index``  only the index changed (``index-name``, else the package ``index`` URL,
                 else the domain its files are served from)
``hash-changed`` the same filename has another hash, or (two snapshots) the same
                 version's installed RECORD changed: a red flag, also in ``warnings``
``marker-changed`` only the package's marker changed (which environments or
                 dependency groups install it)
``patched``      only its patches changed (the profile's ``[[patches]]``: one added,
                 removed, or whose file's sha256 changed); ``patches`` lists them on
                 any entry, paired by the patch file's name

A package of another kind can also have moved index or changed hash; both are shown on
its entry. Files found on one side only (an sdist uv records, another platform's wheel)
are not a change. Unchanged packages are only counted.

The stack section compares ``[tool.stacklock]`` (flattened to dotted keys; the
``cuda`` table goes to ``toolkit``, everything else to ``stack``) plus the lock's
``requires-python``, ``environments``, ``extras``, ``dependency-groups`` and
``default-groups``. Bookkeeping keys (``lock-version``,
``stacklock-version``, ``snapshot``, ``validate``, a snapshot's ``venv`` and
``unknown-origin``) are ignored; a snapshot's ``toolkit`` (found) is compared with a
lock's ``cuda`` (wanted), its exact ``requires-python`` with the lock's range. When a
side has no ``[tool.stacklock]`` (a lock uv, pip, pdm or pex wrote) only those PEP
751 keys are compared and a note says so; when a side is a snapshot, keys found
on one side only are skipped (a snapshot records what it found, not the profile).

``LockDiff.to_dict()`` is ``--json``'s ``stacklock.diff/1``, stable and sorted:
its fields are in docs/formats.md and ``docs/schemas/diff.schema.json`` (the
change kinds there in snake_case, ``moved_index``; ``summary()`` is its counts).
"""

from __future__ import annotations

from stacklock.diff.compare import (
    CHANGE_KINDS,
    LockDiff,
    PackageChange,
    diff_lock_files,
    diff_locks,
)
from stacklock.diff.render import (
    FORMATS,
    render_diff,
    render_json,
    render_markdown,
    render_text,
)
from stacklock.diff.stack import FieldChange

__all__ = [
    "CHANGE_KINDS",
    "FORMATS",
    "FieldChange",
    "LockDiff",
    "PackageChange",
    "diff_lock_files",
    "diff_locks",
    "render_diff",
    "render_json",
    "render_markdown",
    "render_text",
]
