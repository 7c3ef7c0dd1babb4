"""What every verb prints with: JSON, a terminal progress display, options that
several verbs share."""

from __future__ import annotations

import json
import re
from typing import Any

from stacklock.errors import StacklockError

__all__ = ["parse_index_option", "print_json", "progress"]

_NAMED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)=(.+)$")


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


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
