"""``stacklock resolve``: a profile in, a PEP 751 lock out."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["resolve"]


def resolve(args: argparse.Namespace) -> int:
    import os

    from stacklock.cli.output import (
        interactive,
        parse_index_option,
        print_json,
        progress,
    )
    from stacklock.errors import StacklockError

    if args.timeout is not None:
        if args.timeout <= 0:
            raise StacklockError(f"--timeout: {args.timeout:g} is not a number of "
                                 "seconds > 0", hint="e.g. --timeout 60")
        os.environ["STACKLOCK_HTTP_TIMEOUT"] = str(args.timeout)  # this process's
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
            _report(args, replayed.render())
        return 0
    from stacklock.resolve.locking import lock_profile, render_resolve

    live, on_status, on_download = progress(
        enabled=interactive(args), status="resolving")
    with live:
        result = lock_profile(args.profile, output=args.output,
                              index_urls=urls, offline=args.offline,
                              refresh=args.refresh, on_status=on_status,
                              on_download=on_download,
                              check=not args.no_check)
    if args.json:
        print_json(result.to_dict())
    else:
        _report(args, render_resolve(result))
    return 0


def _report(args: argparse.Namespace, text: str) -> None:
    """The lines of a resolution: each phase's one line (-v: every line)."""
    from stacklock.cli.output import brief, say, verbose

    lines = text.split("\n")
    say(args, "\n".join(lines if verbose(args) else brief(lines)))
