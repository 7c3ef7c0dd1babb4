"""``stacklock links``: every link an index has for a project, and why each fits
the target or not. Exit 1 when the index has no page for the project."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from stacklock.cli.output import parse_index_option, print_json, say
from stacklock.errors import (
    IndexesUnreachable,
    IndexUnreadable,
    ProfileError,
    StacklockError,
)

if TYPE_CHECKING:
    import argparse

    from stacklock.profile import IndexSpec, Profile
    from stacklock.target import Target

__all__ = ["links"]


def _target(args: argparse.Namespace, profile: Profile | None) -> Target:
    """The target the flags describe, over the profile's (else the defaults); an
    error names the flag, not the profile key (``--platform``, not
    ``target.platform``)."""
    from dataclasses import replace

    from stacklock.target import Target

    base = profile.target if profile is not None else Target()
    flags = {k: getattr(args, k) for k in ("python", "platform", "manylinux")
             if getattr(args, k) is not None}
    try:
        return replace(base, **flags)
    except ProfileError as exc:
        flag = "--" + (exc.key or "").rpartition(".")[2]  # target.platform
        raise StacklockError(f"{flag}: {exc.detail}", hint=exc.hint) from None


def _indexes(args: argparse.Namespace, profile: Profile | None
             ) -> tuple[IndexSpec, ...]:
    """``--index``, else the profile's indexes (the one PROJECT is pinned to,
    else the first that has it), else PyPI."""
    from stacklock.profile import PYPI_URL, IndexSpec

    kind = "flat" if args.flat else "simple"
    if args.index is not None:
        name, url = parse_index_option(args.index, default_name="index")
        return (IndexSpec(name=name, url=url.rstrip("/") or url, kind=kind),)
    if profile is not None:
        return profile.indexes
    return (IndexSpec(name="pypi", url=PYPI_URL, kind=kind),)


def links(args: argparse.Namespace) -> int:
    from packaging.utils import InvalidName, canonicalize_name

    from stacklock._fs import cache_dir
    from stacklock.http import Credentials, make_http_client
    from stacklock.index.client import IndexClient
    from stacklock.index.finder import (
        Finder,
        find_links,
        render_links,
        render_links_summary,
    )
    from stacklock.profile import load_profile
    from stacklock.tablereader import parse_rfc3339

    try:  # before any request: an index answers a bad name with a 403 or a 404
        canonicalize_name(args.project, validate=True)
    except InvalidName:
        raise StacklockError(
            f"PROJECT {args.project!r} is not a project name",
            hint="letters, digits, '.', '-' and '_', starting and ending with a "
                 "letter or digit, e.g. stacklock links torch") from None
    profile = load_profile(args.profile) if args.profile else None
    indexes = _indexes(args, profile)
    target = _target(args, profile)
    cutoff = parse_rfc3339(args.exclude_newer) if args.exclude_newer else None
    if args.exclude_newer and cutoff is None:
        raise StacklockError(
            f"--exclude-newer {args.exclude_newer!r} is not an RFC 3339 time",
            hint='write it as "2026-02-15T00:00:00Z"')
    if cutoff is None and profile is not None and args.index is None:
        cutoff = profile.requirements.exclude_newer
    with make_http_client(credentials=Credentials(
            (i.name, i.url) for i in indexes)) as http:
        client = IndexClient(http, cache_dir=cache_dir(), offline=args.offline,
                             refresh=args.refresh)
        try:
            index = indexes[0] if len(indexes) == 1 else (
                Finder(client, indexes, target).index_for(args.project)
                or indexes[0])
        except IndexUnreadable as exc:  # name every index that does not answer
            if not exc.network:
                raise
            raise IndexesUnreachable(client.find_unreachable(
                (i, args.project) for i in indexes)) from None
        report = find_links(args.project, index, target, client=client,
                            exclude_newer=cutoff)
    if args.json:
        print_json("links", report.to_dict())
    elif args.all:
        width = max(100, shutil.get_terminal_size((160, 24)).columns)
        say(args, render_links(report, width=width), end="")
    else:
        say(args, render_links_summary(report), end="")
    return 0 if report.evaluations else 1
