"""``stacklock profiles``: the built-in profiles."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.cli.output import print_json

if TYPE_CHECKING:
    import argparse

__all__ = ["profiles"]


def profiles(args: argparse.Namespace) -> int:
    from stacklock.profile import list_profiles, load_profile

    rows = []
    for name in list_profiles():
        profile = load_profile(name)
        rows.append({"name": name, "description": profile.description})
    if args.json:
        print_json(rows)
    else:
        width = max((len(r["name"]) for r in rows), default=0)
        for row in rows:
            print(f"{row['name']:<{width}}  {row['description']}")
    return 0
