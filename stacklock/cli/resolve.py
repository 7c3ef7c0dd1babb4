"""``stacklock resolve``: a profile in, a PEP 751 lock out."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from stacklock.cli.output import parse_index_option, print_json, progress

if TYPE_CHECKING:
    import argparse

__all__ = ["resolve"]


def resolve(args: argparse.Namespace) -> int:
    if not args.offline:
        from stacklock.http import prepare_ssl_context

        # the CA bundle loads in a thread while the resolver's modules import
        prepare_ssl_context()
    from stacklock.resolve.memo import replay_lock

    urls = dict(parse_index_option(item) for item in args.index)
    # nothing changed since the last resolution of this profile: its lock again,
    # without importing the resolver (stacklock.resolve.memo)
    replayed = replay_lock(args.profile, output=args.output, index_urls=urls,
                           offline=args.offline, refresh=args.refresh,
                           check=not args.no_check)
    if replayed is not None:
        if args.json:
            print_json(replayed.to_dict())
        else:
            print(replayed.render())
        return 0
    from stacklock.resolve.early import start_early_pages

    # the profile's own pages are asked for while the resolver imports
    start_early_pages(args.profile, index_urls=urls, offline=args.offline,
                      refresh=args.refresh)
    from stacklock.resolve.locking import lock_profile, render_resolve

    live, on_status, on_download = progress(
        enabled=sys.stderr.isatty() and not args.json, status="resolving")
    with live:
        result = lock_profile(args.profile, output=args.output, index_urls=urls,
                              offline=args.offline, refresh=args.refresh,
                              on_status=on_status, on_download=on_download,
                              check=not args.no_check)
    if args.json:
        print_json(result.to_dict())
    else:
        print(render_resolve(result))
    return 0
