"""``stacklock snapshot``: a PEP 751 lock of what a venv holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["snapshot"]


def snapshot(args: argparse.Namespace) -> int:
    from stacklock.cli.output import say
    from stacklock.lock.write import render_lock
    from stacklock.snapshot import make_snapshot, write_snapshot

    venv = Path(args.venv)
    if args.output:
        say(args, str(write_snapshot(venv, Path(args.output))))
    else:
        print(render_lock(make_snapshot(venv)), end="")
    return 0
