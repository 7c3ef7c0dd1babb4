"""What every verb prints with: JSON, a terminal progress display, options that
several verbs share, and how much it says (``-q`` errors only, the default one
line per phase, ``-v`` every line)."""

from __future__ import annotations

import re
import sys
import time
from typing import TYPE_CHECKING, Any

from stacklock.errors import StacklockError
from stacklock.jsonout import json_document

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping, Sequence

__all__ = ["brief", "interactive", "notice", "parse_index_option", "phase_lines",
           "piped", "print_json", "progress", "say", "verbose"]

# The detail lines ``resolve`` and ``check`` print under a phase, by how they
# start: what the default output counts instead (label; True: count the
# comma-separated items after the colon, not the line).
_DETAIL = (
    ("passed over ", "passed over (would not load)", False),
    ("override:", "override|s", False),
    ("direct reference:", "direct reference|s", False),
    ("warning:", "warning|s", False),
    ("hashed by download", "hashed by download", True),
    ("cuda warning:", "cuda warning|s", False),
    ("cuda carried:", "cuda carried beside a twin", False),
    ("cuda allowed:", "cuda allowed by allow-mixed", False),
    ("allowed by [check] allow:", "allowed by [check] allow", False),
    ("not loaded in this stack", "not loaded in this stack", True),
    ("for the system to provide", "soname|s for the system to provide", True),
    ("skipped ", "skipped", False),
    ("patch:", "patch|es applied", False),
    ("patch note:", "patch note|s", False),
)
_MORE = "more line|s"  # a detail line of no kind above
_PHASE = "native check:"  # a line that starts a phase of its own
# detail lines shown all the same: where the result is, what will not import
_KEEP = ("report:", "native warning:")

_COUNTED = re.compile(r"^(\d+) ([^(:]+)")
_NAMED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)=(.+)$")


def print_json(kind: str, data: Mapping[str, Any]) -> None:
    """The result as ``--json`` prints it: schema ``stacklock.<kind>/1`` first
    (:mod:`stacklock.jsonout`; each one in docs/formats.md)."""
    sys.stdout.write(json_document(kind, data))


def say(args: argparse.Namespace, text: str, *, end: str = "\n") -> None:
    """Print what a person reads, unless ``-q`` asked for errors only."""
    if getattr(args, "verbosity", 0) >= 0:
        print(text, end=end)


def notice(line: str) -> None:
    """A line said the moment it is true, whatever -q, --json or a pipe ask
    (a runfile starting as root): on stderr, flushed."""
    print(f"stacklock: {line}", file=sys.stderr, flush=True)


def verbose(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "verbosity", 0) > 0)


def interactive(args: argparse.Namespace) -> bool:
    """Whether a progress display goes to stderr: a terminal, no --json, no -q."""
    return (sys.stderr.isatty() and not getattr(args, "json", False)
            and getattr(args, "verbosity", 0) >= 0)


def piped(args: argparse.Namespace) -> bool:
    """Whether phase lines go to stderr: not a terminal (a pipe, a CI log), no
    --json, no -q."""
    return (not sys.stderr.isatty() and not getattr(args, "json", False)
            and getattr(args, "verbosity", 0) >= 0)


def phase_lines(status: str, *, clock: Callable[[], float] = time.monotonic,
                write: Callable[[str], Any] | None = None,
                quiet_for: float = 1.0) -> Callable[[str], None]:
    """An ``on_status`` for a pipe (a CI log): one line per phase, with the
    second it began, rather than a status redrawn in place. A run that ends
    within ``quiet_for`` seconds prints none (most resolves); after that, each
    phase is a line from its next status on, the one running then included.
    A status ``"native check: 3 wheels read"`` is the phase ``native check``,
    ``"downloading torch"`` the phase ``downloading``; a status that names no
    phase (``"12 pages, 3 metadata read"``) belongs to ``status``. A phase
    entered again (the resolver back after the check passed a candidate over)
    is a line again."""
    started = clock()
    running, began, said = "", 0.0, False  # the phase, when it began, said yet

    def on_status(text: str) -> None:
        nonlocal running, began, said
        head, colon, _ = text.partition(": ")
        first = text.split(" ", 1)[0]
        phase = head if colon else first if first.isalpha() else status
        now = clock() - started
        if phase != running:
            running, began, said = phase, now, False
        if not said and now >= quiet_for:
            said = True
            line = f"stacklock: {phase} (from {began:.1f} s)\n"
            (write or sys.stderr.write)(line)  # the stderr of the moment

    return on_status


def brief(lines: Sequence[str], *, more: str = "-v shows them") -> list[str]:
    """The default output of a report's lines: each phase's line, its detail
    lines counted on it. A phase is a line at the left margin, and each
    ``native check:`` line; a detail line is one indented under it, counted by
    kind (``_DETAIL``; under a heading ending in ':', as items of it)."""
    out: list[str] = []
    counts: dict[str, int] = {}
    kept: list[str] = []

    def close() -> None:
        if counts and out:
            said = [_counted(n, label) for label, n in counts.items()]
            # a count the phase line states already ("3 passed, 4 skipped")
            summary = ", ".join(s for s in said if s not in out[-1])
            glue = " " if out[-1].endswith(":") else "; "
            out[-1] = (f"{out[-1]}{glue}{summary} ({more})" if summary
                       else f"{out[-1]} ({more})")
        out.extend(kept)
        counts.clear()
        kept.clear()

    for index, line in enumerate(lines):
        text = line.strip()
        if index == 0 or text.startswith(_PHASE) or not line.startswith(" "):
            close()
            out.append(line)
            continue
        if text.startswith(_KEEP):
            kept.append(line)
            continue
        heading = "" if out and out[-1].endswith(":") else _MORE
        label, items = next(((lb, it) for start, lb, it in _DETAIL
                             if text.startswith(start)), (heading, False))
        n = len(text.partition(": ")[2].split(", ")) if items else 1
        counted = _COUNTED.match(text)  # "3 large libraries ... (why): names"
        if counted and label == heading:
            label, n = counted.group(2).strip(), int(counted.group(1))
        counts[label] = counts.get(label, 0) + n
    close()
    return out


def _counted(n: int, label: str) -> str:
    """``3 overrides``, ``1 override``: a label's ``|s`` (``|es``) is its plural
    ending."""
    for ending in ("|es", "|s"):
        label = label.replace(ending, "" if n == 1 else ending[1:])
    return f"{n} {label}".rstrip()


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


def progress(*, enabled: bool, status: str | None,
             lines: bool = False) -> tuple[Any, Any, Any]:
    """(context, on_status, on_download) for a terminal: a rich status line and one
    bar per download. Off in pipes and with --json, where both callbacks are None,
    but for ``lines`` (:func:`piped`): then ``on_status`` writes one line per phase
    (:func:`phase_lines`)."""
    import contextlib

    if not enabled:
        on_phase = phase_lines(status) if lines and status is not None else None
        return contextlib.nullcontext(), on_phase, None
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
