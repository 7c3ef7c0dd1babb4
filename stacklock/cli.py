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
