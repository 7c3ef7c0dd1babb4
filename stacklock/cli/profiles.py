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
    from stacklock.words import first as first_of

    rows: list[dict[str, str]] = []
    broken: list[tuple[str, ProfileError]] = []
    for found in find_profiles():
        try:  # every broken profile is named, not only the first one read
            description = load_profile(str(found.path)).description
        except ProfileError as exc:
            broken.append((str(found.path), exc))
            continue
        rows.append({"name": found.name, "origin": found.origin,
                     "path": str(found.path), "description": description})
    if broken:  # bad input: one line, nothing on stdout, as every verb's
        first = broken[0][1]
        others = [path for path, _ in broken[1:]]
        raise ProfileError(first.message + (f" (unreadable too: {first_of(others, 3)})"
                                            if others else ""), hint=first.hint)
    if args.json:
        print_json("profiles", {"profiles": rows})
        return 0
    width = max((len(r["name"]) for r in rows), default=0)
    for row in rows:
        say(args, f"{row['name']:<{width}}  {row['origin']:<8}  {row['description']}")
    return 0
