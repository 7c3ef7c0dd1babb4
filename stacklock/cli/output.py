"""What every verb prints with: JSON, a terminal progress display, options that
several verbs share, and how much it says (``-q`` errors only, the default one
line per phase, ``-v`` every line)."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["brief", "interactive", "parse_index_option", "print_json", "progress",
           "say", "verbose"]

# The detail lines ``resolve`` and ``check`` print under a phase, by how they
# start: what the default output counts instead (label; True: count the
# comma-separated items after the colon, not the line).
_DETAIL = (
    ("override:", "overrides", False),
    ("warning:", "warnings", False),
    ("hashed by download", "hashed by download", True),
    ("cuda warning:", "cuda warnings", False),
    ("cuda carried:", "cuda carried", False),
    ("allowed by [check] allow:", "allowed by [check] allow", False),
    ("not loaded in this stack", "not loaded in this stack", True),
    ("for the system to provide", "sonames for the system to provide", True),
)
_PHASE = "native check:"  # a line that starts a phase of its own

_NAMED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)=(.+)$")


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def say(args: argparse.Namespace, text: str, *, end: str = "\n") -> None:
    """Print what a person reads, unless ``-q`` asked for errors only."""
    if getattr(args, "verbosity", 0) >= 0:
        print(text, end=end)


def verbose(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "verbosity", 0) > 0)


def interactive(args: argparse.Namespace) -> bool:
    """Whether a progress display goes to stderr: a terminal, no --json, no -q."""
    return (sys.stderr.isatty() and not getattr(args, "json", False)
            and getattr(args, "verbosity", 0) >= 0)


def brief(lines: Sequence[str], *, more: str = "-v shows them") -> list[str]:
    """The default output of a report's lines: each phase's headline, its detail
    lines counted on one line. A phase is the first line (the headline) and
    each ``native check:`` line; a detail line is one indented under it."""
    out: list[str] = []
    counts: dict[str, int] = {}

    def close() -> None:
        if counts:
            summary = ", ".join(f"{n} {label}" for label, n in counts.items())
            out[-1] = (f"{out[-1]}; {summary} ({more})" if out else
                       f"{summary} ({more})")
            counts.clear()

    for index, line in enumerate(lines):
        text = line.strip()
        if index == 0 or text.startswith(_PHASE) or not line.startswith(" "):
            close()
            out.append(line)
            continue
        label, items = next(((lb, it) for start, lb, it in _DETAIL
                             if text.startswith(start)),
                            (text.partition(":")[0][:40], False))
        n = len(text.partition(": ")[2].split(", ")) if items else 1
        counts[label] = counts.get(label, 0) + n
    close()
    return out


def parse_index_option(text: str, *,
                       default_name: str | None = None) -> tuple[str, str]:
    """``--index NAME=URL`` as (name, url). With ``default_name`` the name may be
    left out (``--index URL``); without it, a missing name is an error."""
    named = _NAMED.match(text)
    if named:
        return named.group(1), named.group(2)
    if default_name is not None and text.strip():
        return default_name, text
    raise StacklockError(f"--index {text!r} is not NAME=URL",
                         hint="e.g. --index pypi=http://127.0.0.1:8080/simple")


def progress(*, enabled: bool, status: str | None) -> tuple[Any, Any, Any]:
    """(context, on_status, on_download) for a terminal: a rich status line and one
    bar per download; off in pipes and with --json, where both callbacks are None."""
    import contextlib

    if not enabled:
        return contextlib.nullcontext(), None, None
    from rich.console import Console
    from rich.filesize import decimal
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

    live = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                    BarColumn(), TextColumn("{task.fields[size]}"),
                    console=Console(stderr=True), transient=True)
    files: dict[str, Any] = {}
    on_status = None
    if status is not None:
        line = live.add_task(status, total=None, size="")

        def on_status(text: str) -> None:
            live.update(line, description=f"{status}: {text}")

    def on_download(name: str, done: int, total: int | None) -> None:
        if name not in files:
            files[name] = live.add_task(name, total=total, size="")
        size = decimal(done) + (f"/{decimal(total)}" if total else "")
        live.update(files[name], completed=done, total=total, size=size)

    return live, on_status, on_download
