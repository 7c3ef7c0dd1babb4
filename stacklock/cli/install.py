"""``stacklock install``: a lock into a venv (wheels through uv) and its toolkit,
or a pack made by ``stacklock pack``; ``--rollback`` restores the previous venv.

uv gets a head start (:mod:`stacklock.install.early`): it is started as soon as
the arguments are parsed, and the rest of install loads and plans while it works.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import argparse

    from stacklock.install.early import HeadStart

__all__ = ["install"]


def install(args: argparse.Namespace) -> int:
    if args.rollback:
        from stacklock.cli.output import print_json, say
        from stacklock.install.render import render_rollback
        from stacklock.install.run import rollback_install

        back = rollback_install(Path(args.venv))
        if args.json:
            print_json("install-rollback", back.to_dict())
        else:
            say(args, render_rollback(back))
        return 0
    if args.lock is None:
        raise StacklockError("install needs a LOCK", hint="stacklock install LOCK")
    from stacklock.install.layout import VenvLayout, refuse_running_environment

    # before uv's head start makes anything
    refuse_running_environment(VenvLayout(venv=Path(os.path.abspath(args.venv))))
    from stacklock._fs import cache_dir
    from stacklock.cli.archive import archive_for
    from stacklock.install.early import head_start

    args.archive = archive_for(args, args.lock)
    # with an archive every file goes through the store: uv gets no head start
    started = (nullcontext(None) if args.dry_run or args.reinstall or args.archive else
               head_start(Path(args.lock), venv=Path(args.venv), python=args.python,
                          cache=cache_dir()))
    with started as head:
        if head is None:
            from stacklock.pack.format import is_pack

            if is_pack(args.lock):
                from stacklock.cli.pack import install_from_pack

                return install_from_pack(args)
        return _install(args, head)


def _install(args: argparse.Namespace, head: HeadStart | None) -> int:
    from stacklock.cli.output import (
        brief,
        interactive,
        notice,
        print_json,
        progress,
        say,
        verbose,
    )
    from stacklock.install.inputs import Wanted
    from stacklock.install.render import render_install
    from stacklock.install.run import DEFAULT_CUDA_LINK, install_lock

    live, _, on_download = progress(enabled=interactive(args), status=None)
    with live:
        result = install_lock(
            Path(args.lock),
            venv=Path(args.venv),
            python=args.python or (head.python if head else None),
            toolkit_prefix=Path(args.toolkit_prefix) if args.toolkit_prefix else None,
            no_toolkit=args.no_toolkit,
            dry_run=args.dry_run,
            allow_no_gpu=args.allow_no_gpu,
            link_cuda_at=DEFAULT_CUDA_LINK if args.link_cuda else None,
            validate=not args.no_validate,
            report_dir=Path(args.report) if args.report else None,
            on_download=on_download,
            head=head,
            wanted=Wanted(extras=tuple(args.extra),
                          groups=tuple(args.group) if args.group else None,
                          no_build=args.no_build,
                          unknown_runfile=args.allow_unknown_runfile),
            reinstall=args.reinstall,
            archive=args.archive,
            content=head.lock_bytes if head is not None else None,
            on_notice=notice,
        )
    if args.json:
        print_json("install", result.to_dict())
    else:  # a dry run's plan is the answer: every line; an install's, by phase
        lines = render_install(result).split("\n")
        say(args, "\n".join(lines if args.dry_run or verbose(args)
                             else brief(lines)))
    return 0 if result.ok else 1
