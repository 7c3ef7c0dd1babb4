"""``stacklock validate``: check an installed venv against its lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.cli.output import print_json
from stacklock.validate import render_text, validate

if TYPE_CHECKING:
    import argparse

__all__ = ["validate_venv"]


def validate_venv(args: argparse.Namespace) -> int:
    result = validate(
        args.lock, venv=args.venv, python=args.python, gate=not args.no_gate,
        probes=not args.no_probes, report_dir=args.report,
        toolkit_prefix=args.toolkit_prefix,
    )
    print_json(result.to_dict()) if args.json else print(render_text(result))
    return result.exit_code
