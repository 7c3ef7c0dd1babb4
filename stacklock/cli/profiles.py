"""``stacklock profiles``: the profiles a name finds, built-in and local."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.cli.output import print_json, say

if TYPE_CHECKING:
    import argparse

__all__ = ["profiles"]


def profiles(args: argparse.Namespace) -> int:
    from stacklock.errors import ProfileError
    from stacklock.profile import find_profiles, load_profile

    rows: list[dict[str, str]] = []
    broken: list[ProfileError] = []
    for found in find_profiles():
        row = {"name": found.name, "origin": found.origin, "path": str(found.path)}
        try:  # a broken profile is listed as such, never hides the others
            row["description"] = load_profile(str(found.path)).description
        except ProfileError as exc:
            row["description"] = f"cannot be read: {exc.message}"
            broken.append(exc)
        rows.append(row)
    if args.json and broken:
        raise broken[0]  # --json: the error object alone, as every verb's
    if args.json:
        print_json("profiles", {"profiles": rows})
        return 0
    width = max((len(r["name"]) for r in rows), default=0)
    for row in rows:
        say(args, f"{row['name']:<{width}}  {row['origin']:<8}  {row['description']}")
    if broken:
        raise broken[0]  # after the list: exit 2 naming the first broken one
    return 0
