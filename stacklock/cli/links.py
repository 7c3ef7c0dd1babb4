"""``stacklock links``: every link an index has for a project, and why each fits
the target or not."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from stacklock._fs import cache_dir
from stacklock.cli.output import parse_index_option, print_json
from stacklock.errors import StacklockError
from stacklock.http import make_http_client
from stacklock.index import IndexClient, find_links, render_links
from stacklock.profile import IndexSpec
from stacklock.tables import parse_rfc3339
from stacklock.target import Target

if TYPE_CHECKING:
    import argparse

__all__ = ["links"]


def links(args: argparse.Namespace) -> int:
    name, url = parse_index_option(args.index, default_name="index")
    index = IndexSpec(name=name, url=url.rstrip("/") or url,
                      kind="flat" if args.flat else "simple")
    target = Target(python=args.python, platform=args.platform,
                    manylinux=args.manylinux)
    cutoff = parse_rfc3339(args.exclude_newer) if args.exclude_newer else None
    if args.exclude_newer and cutoff is None:
        raise StacklockError(
            f"--exclude-newer {args.exclude_newer!r} is not an RFC 3339 time",
            hint='write it as "2026-02-15T00:00:00Z"')
    with make_http_client() as http:
        client = IndexClient(http, cache_dir=cache_dir(), offline=args.offline,
                             refresh=args.refresh)
        report = find_links(args.project, index, target, client=client,
                            exclude_newer=cutoff)
    if args.json:
        print_json(report.to_dict())
    else:
        width = max(100, shutil.get_terminal_size((160, 24)).columns)
        print(render_links(report, width=width), end="")
    return 0
