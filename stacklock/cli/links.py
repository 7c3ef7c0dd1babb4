"""``stacklock links``: every link an index has for a project, and why each fits
the target or not. Exit 1 when the index has no page for the project."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from stacklock.cli.output import parse_index_option, print_json
from stacklock.errors import ProfileError, StacklockError

if TYPE_CHECKING:
    import argparse

    from stacklock.target import Target

__all__ = ["links"]


def _target(args: argparse.Namespace) -> Target:
    """The target the flags describe; an error names the flag, not the profile
    key (``--platform``, not ``target.platform``)."""
    from stacklock.target import Target

    try:
        return Target(python=args.python, platform=args.platform,
                      manylinux=args.manylinux)
    except ProfileError as exc:
        flag = "--" + (exc.key or "").rpartition(".")[2]  # target.platform
        raise StacklockError(f"{flag}: {exc.detail}", hint=exc.hint) from None


def links(args: argparse.Namespace) -> int:
    from packaging.utils import InvalidName, canonicalize_name

    from stacklock._fs import cache_dir
    from stacklock.http import make_http_client
    from stacklock.index.client import IndexClient
    from stacklock.index.finder import find_links, render_links
    from stacklock.profile import IndexSpec
    from stacklock.tablereader import parse_rfc3339

    try:  # before any request: an index answers a bad name with a 403 or a 404
        canonicalize_name(args.project, validate=True)
    except InvalidName:
        raise StacklockError(
            f"PROJECT {args.project!r} is not a project name",
            hint="letters, digits, '.', '-' and '_', starting and ending with a "
                 "letter or digit, e.g. stacklock links torch --index URL") from None
    name, url = parse_index_option(args.index, default_name="index")
    index = IndexSpec(name=name, url=url.rstrip("/") or url,
                      kind="flat" if args.flat else "simple")
    target = _target(args)
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
    return 0 if report.evaluations else 1
