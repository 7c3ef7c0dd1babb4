"""``stacklock snapshot``: a PEP 751 lock of what a venv holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["snapshot"]


def snapshot(args: argparse.Namespace) -> int:
    import sys

    from stacklock.cli.output import say
    from stacklock.lock.write import render_lock
    from stacklock.snapshot import make_snapshot, write_snapshot

    venv = Path(args.venv)
    warnings: list[str] = []
    if args.output:
        written = write_snapshot(venv, Path(args.output), warnings=warnings)
    else:
        text = render_lock(make_snapshot(venv, warnings=warnings))
    if getattr(args, "verbosity", 0) >= 0:
        for line in warnings:  # on stderr: the lock may be what stdout carries
            print(f"warning: {line}", file=sys.stderr)
    if args.output:
        say(args, str(written))
    else:
        print(text, end="")
    return 0
