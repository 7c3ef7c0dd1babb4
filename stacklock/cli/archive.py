"""``stacklock archive LOCK DEST``: the files a lock installs, copied where they
outlive the index (a folder or an s3:// prefix), with a PEP 503 index."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["archive"]


def archive(args: argparse.Namespace) -> int:
    from stacklock.archive import archive_lock, render_archive
    from stacklock.cli.output import interactive, print_json, progress, say

    live, _, on_download = progress(enabled=interactive(args), status="archiving")
    with live:
        result = archive_lock(args.lock, args.dest, no_toolkit=args.no_toolkit,
                              on_download=on_download)
    if args.json:
        print_json("archive", result.to_dict())
    else:
        say(args, render_archive(result))
    return 0
