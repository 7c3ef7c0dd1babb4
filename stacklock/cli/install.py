"""``stacklock install``: a lock into a venv (wheels through uv) and its toolkit;
``--rollback`` restores the previous venv."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.cli.output import print_json, progress
from stacklock.errors import StacklockError
from stacklock.install import (
    DEFAULT_CUDA_LINK,
    install_lock,
    render_install,
    render_rollback,
    rollback_install,
)

if TYPE_CHECKING:
    import argparse

__all__ = ["install"]


def install(args: argparse.Namespace) -> int:
    if args.rollback:
        back = rollback_install(Path(args.venv))
        print_json(back.to_dict()) if args.json else print(render_rollback(back))
        return 0
    if args.lock is None:
        raise StacklockError("install needs a LOCK", hint="stacklock install LOCK")
    from stacklock.pack import is_pack

    if is_pack(args.lock):
        from stacklock.cli.pack import install_from_pack

        return install_from_pack(args)
    live, _, on_download = progress(
        enabled=sys.stderr.isatty() and not args.json, status=None)
    with live:
        result = install_lock(
            Path(args.lock),
            venv=Path(args.venv),
            python=args.python,
            toolkit_prefix=Path(args.toolkit_prefix) if args.toolkit_prefix else None,
            no_toolkit=args.no_toolkit,
            dry_run=args.dry_run,
            allow_no_gpu=args.allow_no_gpu,
            link_cuda_at=DEFAULT_CUDA_LINK if args.link_cuda else None,
            validate=not args.no_validate,
            report_dir=Path(args.report) if args.report else None,
            on_download=on_download,
        )
    print_json(result.to_dict()) if args.json else print(render_install(result))
    return 0 if result.ok else 1
