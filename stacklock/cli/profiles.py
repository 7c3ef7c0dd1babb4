"""``stacklock profiles``: the profiles a name finds, built-in and local."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.cli.output import print_json, say

if TYPE_CHECKING:
    import argparse

__all__ = ["profiles"]


def profiles(args: argparse.Namespace) -> int:
    from stacklock.profile import find_profiles, load_profile

    rows = []
    for found in find_profiles():
        profile = load_profile(str(found.path))
        rows.append({"name": found.name, "origin": found.origin,
                     "path": str(found.path), "description": profile.description})
    if args.json:
        print_json("profiles", {"profiles": rows})
    else:
        width = max((len(r["name"]) for r in rows), default=0)
        for row in rows:
            say(args, f"{row['name']:<{width}}  {row['origin']:<8}  "
                      f"{row['description']}")
    return 0
