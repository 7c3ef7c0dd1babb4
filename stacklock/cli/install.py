"""``stacklock install``: a lock into a venv (wheels through uv) and its toolkit;
``--rollback`` restores the previous venv.

uv gets a head start (:mod:`stacklock.install.early`) before the rest of install
is imported: this module imports it first and everything heavy after.
"""

from __future__ import annotations

import sys
from pathlib import Path

from stacklock.errors import StacklockError

TYPE_CHECKING = False  # not typing's: loaded before uv's head start

if TYPE_CHECKING:
    import argparse

    from stacklock.install.early import HeadStart

__all__ = ["install"]


def install(args: argparse.Namespace) -> int:
    if args.rollback:
        from stacklock.cli.output import print_json
        from stacklock.install import render_rollback, rollback_install

        back = rollback_install(Path(args.venv))
        print_json(back.to_dict()) if args.json else print(render_rollback(back))
        return 0
    if args.lock is None:
        raise StacklockError("install needs a LOCK", hint="stacklock install LOCK")
    if args.dry_run:  # changes nothing, so nothing to start early
        return _pack(args) if _is_pack(args.lock) else _install(args, None)
    from stacklock._fs import cache_dir
    from stacklock.install.early import head_start

    with head_start(Path(args.lock), venv=Path(args.venv), python=args.python,
                    cache=cache_dir()) as head:
        if head is None and _is_pack(args.lock):
            return _pack(args)
        return _install(args, head)


def _is_pack(path: str) -> bool:
    from stacklock.pack import is_pack

    return is_pack(path)


def _pack(args: argparse.Namespace) -> int:
    from stacklock.cli.pack import install_from_pack

    return install_from_pack(args)


def _install(args: argparse.Namespace, head: HeadStart | None) -> int:
    from stacklock.cli.output import print_json, progress
    from stacklock.install import (
        DEFAULT_CUDA_LINK,
        install_lock,
        render_install,
    )

    live, _, on_download = progress(
        enabled=sys.stderr.isatty() and not args.json, status=None)
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
        )
    print_json(result.to_dict()) if args.json else print(render_install(result))
    return 0 if result.ok else 1
