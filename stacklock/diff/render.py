"""Render a :class:`~stacklock.diff.LockDiff` as text, Markdown or JSON.

Text is for a terminal (rich tables, rendered into a string: the CLI prints it),
Markdown fits a pull-request comment (a summary line, warnings, the toolkit and
stack, then the package changes, folded when long), JSON is the stable, sorted
``LockDiff.to_dict()`` (``stacklock.diff/1``, in docs/formats.md). Text and
Markdown list the most telling changes first (a changed hash, a rebuild, an index
move, then upgrades, ..., additions and removals); JSON keeps the name order.
"""

from __future__ import annotations

from io import StringIO
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stacklock.jsonout import json_document

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stacklock.diff.compare import LockDiff, PackageChange
    from stacklock.diff.stack import FieldChange, Value

__all__ = ["FORMATS", "render_diff", "render_json", "render_markdown", "render_text"]

FORMATS = ("text", "markdown", "json")
_REVIEW_ORDER = (
    "hash-changed",
    "patched",
    "rebuilt",
    "moved-index",
    "upgraded",
    "downgraded",
    "replaced",
    "marker-changed",
    "added",
    "removed",
)
_STYLES = {
    "hash-changed": "bold red",
    "patched": "cyan",
    "rebuilt": "magenta",
    "moved-index": "yellow",
    "upgraded": "green",
    "downgraded": "yellow",
    "added": "green",
    "removed": "red",
}
_MARKDOWN_OPEN_ROWS = 40  # longer package tables fold into <details>


def render_diff(
    diff: LockDiff, fmt: str, *, color: bool = False, width: int = 110
) -> str:
    if fmt == "markdown":
        return render_markdown(diff)
    if fmt == "json":
        return render_json(diff)
    return render_text(diff, color=color, width=width)


def render_json(diff: LockDiff) -> str:
    """``stacklock.diff/1`` (docs/formats.md)."""
    return json_document("diff", diff.to_dict())


def summary_line(diff: LockDiff) -> str:
    """``42 packages changed (8 upgraded, 16 added, ...), 127 unchanged; ...``"""
    if not diff.differs:
        return f"no differences: {diff.unchanged} packages unchanged"
    summary = diff.summary()
    counts = {k: summary["changes"][k.replace("-", "_")] for k in _REVIEW_ORDER}
    kinds = [f"{counts[k]} {k}" for k in _REVIEW_ORDER if counts[k]]
    moves = summary["aspects"]["index"] - counts["moved-index"]
    if moves:
        kinds.append(f"{moves} more moved index")
    parts = [
        f"{len(diff.packages)} package{'s' if len(diff.packages) != 1 else ''} changed"
        + (f" ({', '.join(kinds)})" if kinds else ""),
        f"{diff.unchanged} unchanged",
    ]
    line = ", ".join(parts)
    stack = [
        f"{n} {what} change{'s' if n != 1 else ''}"
        for n, what in ((len(diff.toolkit), "toolkit"), (len(diff.stack), "stack"))
        if n
    ]
    return line + ("; " + ", ".join(stack) if stack else "")


def _review_sorted(diff: LockDiff) -> list[PackageChange]:
    rank = {kind: i for i, kind in enumerate(_REVIEW_ORDER)}
    return sorted(diff.packages, key=lambda p: (rank.get(p.change, 99), p.name))


def _note(change: PackageChange) -> str:
    bits = []
    if change.detail:
        bits.append(change.detail)
    if change.cuda is not None:
        old, new = change.cuda
        if old is None or new is None:
            bits.append(f"cuda {old or new}")
        else:
            bits.append(f"cuda {old} -> {new}")
    if change.hash is not None:
        bits.append("HASH CHANGED (see warnings)")
    bits.extend(p.text() for p in change.patches)
    return "; ".join(bits)


def _index_cell(change: PackageChange) -> str:
    if change.index is None:
        return ""
    return f"{_show(change.index[0])} -> {_show(change.index[1])}"


# a minimum driver the catalog does not know (NVIDIA's table lists none for
# 13.0.3): unknown, not absent; the compatibility floor is the row below
_DRIVER_KEYS = ("cuda.min-driver",)


def _show_field(key: str, value: Value) -> str:
    if value is None and key in _DRIVER_KEYS:
        return "unknown (see cuda.compat-floor)"
    return _show(value)


def _show(value: Value) -> str:
    """One readable cell: lists joined, index tables as ``name=url``."""
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return ", ".join(_show(v) for v in value) or "(empty)"
    if isinstance(value, dict):
        if "name" in value and "url" in value:
            return f"{value['name']}={value['url']}"
        return " ".join(f"{k}={_show(v)}" for k, v in value.items())
    if isinstance(value, bool):
        return str(value).lower()
    text = str(value)
    if len(text) >= 40 and all(c in "0123456789abcdef" for c in text):
        return text[:12] + "…"  # a digest: the head tells them apart
    return text


def _package_rows(
    diff: LockDiff,
) -> tuple[tuple[str, ...], list[PackageChange], list[tuple[str, ...]]]:
    """Header and rows; the index and note columns only when a row fills them."""
    changes = _review_sorted(diff)
    full = [
        (c.name, c.change, c.old or "", c.new or "", _index_cell(c), _note(c))
        for c in changes
    ]
    keep = [i for i in range(6) if i < 4 or any(row[i] for row in full)]
    header = tuple(
        ("package", "change", "old", "new", "index", "note")[i] for i in keep
    )
    return header, changes, [tuple(row[i] for i in keep) for row in full]


_RUNFILE_DETAILS = ("url", "md5", "sha256", "size")


def _field_rows(diff: LockDiff) -> tuple[list[tuple[str, FieldChange]], str | None]:
    """Rows of the toolkit and stack table, and a line naming the rows left out:
    a new runfile brings a new url, md5, sha256 and size, and a new prefix new
    install arguments; repeating them hides what matters (JSON keeps them)."""
    changed = {f.key: f for f in diff.toolkit}
    hidden: set[str] = set()
    if "runfile" in changed:
        hidden.update(k for k in _RUNFILE_DETAILS if k in changed)
    prefix = changed.get("prefix")
    args = changed.get("install-args")
    if prefix is not None and args is not None and _only_prefix(prefix, args):
        hidden.add("install-args")
    rows = [(f"cuda.{f.key}", f) for f in diff.toolkit if f.key not in hidden]
    rows += [(f.key, f) for f in diff.stack]
    if not hidden:
        return rows, None
    names = ", ".join(f"cuda.{k}" for k in sorted(hidden))
    return (
        rows,
        f"{names} changed with the runfile and prefix (--format json lists them)",
    )


def _only_prefix(prefix: FieldChange, args: FieldChange) -> bool:
    old, new = args.old, args.new
    if not (isinstance(old, list) and isinstance(new, list)):
        return False
    swapped = [str(a).replace(str(prefix.old), str(prefix.new)) for a in old]
    return swapped == [str(a) for a in new]


# -- text ------------------------------------------------------------------------


def render_text(diff: LockDiff, *, width: int = 110, color: bool = False) -> str:
    console = Console(
        file=StringIO(),
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        highlight=False,
        markup=False,
        emoji=False,
    )
    console.print(Text(f"stacklock diff {diff.old_path} -> {diff.new_path}", "bold"))
    console.print(summary_line(diff))
    for warning in diff.warnings:
        console.print(Text(f"warning: {warning}", "bold red"))
    fields, hidden = _field_rows(diff)
    if fields:
        console.print()
        table = Table(
            title="toolkit and stack", box=box.SIMPLE_HEAD, title_justify="left"
        )
        for column in ("key", "old", "new"):
            table.add_column(column, overflow="fold")
        for key, field in fields:
            table.add_row(key, _show_field(key, field.old), _show_field(key, field.new))
        console.print(table)
    if hidden:
        console.print(hidden)
    if diff.packages:
        header, changes, rows = _package_rows(diff)
        console.print()
        table = Table(title="packages", box=box.SIMPLE_HEAD, title_justify="left")
        for column in header:
            table.add_column(column, overflow="fold")
        for change, row in zip(changes, rows, strict=True):
            style = _STYLES.get(change.change, "")
            table.add_row(row[0], Text(row[1], style), *row[2:])
        console.print(table)
    for note in diff.notes:
        console.print(f"note: {note}")
    file = console.file
    assert isinstance(file, StringIO)
    return "\n".join(line.rstrip() for line in file.getvalue().splitlines()) + "\n"


# -- markdown --------------------------------------------------------------------


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(diff: LockDiff) -> str:
    out = [
        f"### stacklock diff: `{diff.old_path}` → `{diff.new_path}`",
        "",
        f"**{summary_line(diff)}**",
    ]
    if diff.warnings:
        out += ["", "> [!WARNING]"]
        out += [f"> - {_cell(w)}" for w in diff.warnings]
    fields, hidden = _field_rows(diff)
    if fields:
        stack_rows = [(f"`{key}`", _show_field(key, f.old), _show_field(key, f.new))
                      for key, f in fields]
        out += ["", "#### toolkit and stack", ""]
        out += _md_table(("key", "old", "new"), stack_rows)
        if hidden:
            out += ["", f"_{hidden}_"]
    if diff.packages:
        header, changes, rows = _package_rows(diff)
        rows = [
            (f"`{row[0]}`", f"**{row[1]}**" if c.hash else row[1], *row[2:])
            for c, row in zip(changes, rows, strict=True)
        ]
        table = _md_table(header, rows)
        if len(rows) > _MARKDOWN_OPEN_ROWS:
            summary = f"{len(rows)} package changes"
            table = ["<details>", f"<summary>{summary}</summary>", "", *table]
            table += ["", "</details>"]
        out += ["", "#### packages", "", *table]
    if diff.notes:
        out += ["", *(f"_note: {_cell(n)}_" for n in diff.notes)]
    return "\n".join(out) + "\n"
