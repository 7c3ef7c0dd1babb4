"""``stacklock diff``: what changed between two PEP 751 locks."""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["diff"]


def diff(args: argparse.Namespace) -> int:
    from stacklock.cli.output import say
    from stacklock.diff import diff_lock_files, render_diff

    result = diff_lock_files(args.old, args.new)
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size((110, 24)).columns if tty else 110
    style = "json" if args.json else args.format
    text = render_diff(result, style, color=tty, width=width)
    print(text, end="") if style == "json" else say(args, text, end="")
    return 1 if args.exit_code and result.differs else 0
