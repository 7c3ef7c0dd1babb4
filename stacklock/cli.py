"""The command line: parse arguments, make one library call, print, exit.

This is the only module that prints. Every ``StacklockError`` becomes one line on
stderr and its exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from stacklock import __version__
from stacklock.errors import StacklockError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["main"]


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def _cmd_profiles(args: argparse.Namespace) -> int:
    from stacklock.profile import list_profiles, load_profile

    rows = []
    for name in list_profiles():
        profile = load_profile(name)
        rows.append({"name": name, "description": profile.description})
    if args.json:
        _print_json(rows)
    else:
        width = max((len(r["name"]) for r in rows), default=0)
        for row in rows:
            print(f"{row['name']:<{width}}  {row['description']}")
    return 0


def _cmd_links(args: argparse.Namespace) -> int:
    import re
    from datetime import datetime

    from stacklock._fs import cache_dir
    from stacklock.index import (
        IndexClient,
        find_links,
        make_http_client,
        render_links,
    )
    from stacklock.profile import IndexSpec
    from stacklock.target import Target

    named = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)=(.+)$", args.index)
    name, url = (named.group(1), named.group(2)) if named else ("index", args.index)
    index = IndexSpec(name=name, url=url.rstrip("/") or url,
                      kind="flat" if args.flat else "simple")
    target = Target(python=args.python, platform=args.platform,
                    manylinux=args.manylinux)
    cutoff = None
    if args.exclude_newer:
        try:
            cutoff = datetime.fromisoformat(args.exclude_newer.replace("Z", "+00:00"))
        except ValueError:
            raise StacklockError(
                f"--exclude-newer {args.exclude_newer!r} is not an RFC 3339 time",
                hint='write it as "2026-02-15T00:00:00Z"') from None
    with make_http_client() as http:
        client = IndexClient(http, cache_dir=cache_dir(), offline=args.offline,
                             refresh=args.refresh)
        report = find_links(args.project, index, target, client=client,
                            exclude_newer=cutoff)
    if args.json:
        _print_json(report.to_dict())
    else:
        print(render_links(report), end="")
    return 0


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stacklock",
        description="Lock, install, validate and diff GPU software stacks.",
    )
    parser.add_argument(
        "--version", action="version", version=f"stacklock {__version__}"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("profiles", help="list the built-in profiles")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_profiles)

    p = sub.add_parser(
        "links", help="list every link an index has for a project, and why each "
        "fits the target or not")
    p.add_argument("project")
    p.add_argument("--index", required=True, metavar="[NAME=]URL",
                   help="https URL of a simple index, a file:// URL or a folder")
    p.add_argument("--flat", action="store_true",
                   help="the URL is a find-links page, not a simple index root")
    p.add_argument("--python", default="3.12")
    p.add_argument("--platform", default="linux_x86_64")
    p.add_argument("--manylinux", default="2_28")
    p.add_argument("--exclude-newer", metavar="TIME")
    p.add_argument("--offline", action="store_true", help="use only the page cache")
    p.add_argument("--refresh", action="store_true",
                   help="revalidate cached pages with the index")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_links)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except StacklockError as exc:
        print(f"stacklock: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("stacklock: interrupted; nothing was half-written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
