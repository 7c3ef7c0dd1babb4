"""``stacklock validate``: check an installed venv against its lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.cli.output import print_json, say

if TYPE_CHECKING:
    import argparse

__all__ = ["validate_venv"]


def validate_venv(args: argparse.Namespace) -> int:
    from stacklock.lock import load_lock
    from stacklock.validate.report import render_text
    from stacklock.validate.run import validate

    # the lock first: a wrong lock path is the likelier mistake, and says more
    lock = load_lock(args.lock) if args.lock is not None else None
    result = validate(
        lock, venv=args.venv, python=args.python, gate=not args.no_gate,
        probes=not args.no_probes, report_dir=args.report,
        toolkit_prefix=args.toolkit_prefix, allow_no_gpu=args.allow_no_gpu,
    )
    print_json("validate", result.to_dict()) if args.json else \
        say(args, render_text(result))
    return result.exit_code
