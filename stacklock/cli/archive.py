"""``stacklock archive LOCK [DEST]``: the files a lock installs, copied where
they outlive the index (a folder or an s3:// prefix), with a PEP 503 index; and
which archive a verb that fetches a lock's files reads (:func:`archive_for`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from stacklock.lockarchive import Archive

__all__ = ["archive", "archive_for"]


def archive_for(args: argparse.Namespace, *locks: str | Path) -> Archive | None:
    """``--archive`` (``--archive-first``), else ``STACKLOCK_ARCHIVE``, else the
    archive the first of ``locks`` records (its profile's ``[archive]``; a
    pack records none: it installs from itself)."""
    from stacklock.lockarchive import ARCHIVE_ENV, Archive

    recorded = None
    if not (args.archive or os.environ.get(ARCHIVE_ENV)):
        recorded = next(filter(None, map(_recorded, locks)), None)
    return Archive.from_options(args.archive, first=args.archive_first,
                                recorded=recorded)


def _recorded(lock: str | Path) -> Archive | None:
    from stacklock.lock import load_lock
    from stacklock.lockarchive import Archive
    from stacklock.pack.format import is_pack

    if is_pack(lock):
        return None
    stack = load_lock(lock).stack
    found = stack.archive if stack is not None else None
    return None if found is None else Archive(url=found.url, first=found.first)


def archive(args: argparse.Namespace) -> int:
    from stacklock.archive import archive_lock, render_archive
    from stacklock.cli.output import interactive, print_json, progress, say

    dest = args.dest
    if dest is None:
        recorded = _recorded(args.lock)
        if recorded is None:
            raise StacklockError(f"{args.lock}: no DEST given and the lock records "
                                 "no archive", hint="stacklock archive LOCK DEST, "
                                 "or [archive] url in the profile")
        dest = recorded.url
    live, _, on_download = progress(enabled=interactive(args), status="archiving")
    with live:
        result = archive_lock(args.lock, dest, no_toolkit=args.no_toolkit,
                              on_download=on_download)
    if args.json:
        print_json("archive", result.to_dict())
    else:
        say(args, render_archive(result))
    return 0
