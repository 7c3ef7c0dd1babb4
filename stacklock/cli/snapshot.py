"""``stacklock snapshot``: a PEP 751 lock of what a venv holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["snapshot"]


def snapshot(args: argparse.Namespace) -> int:
    import sys

    from stacklock.cli.output import print_json, say
    from stacklock.lock.write import dump_lock, render_lock
    from stacklock.snapshot import make_snapshot

    venv = Path(args.venv)
    if args.patches:  # first: a failure leaves no snapshot behind
        _patches(args, venv, Path(args.patches))
    output = Path(args.output) if args.output else None
    warnings: list[str] = []
    lock = make_snapshot(venv, path=output or "", warnings=warnings)
    if output is not None:
        dump_lock(lock, output)
    if getattr(args, "verbosity", 0) >= 0 and not args.json:
        for line in warnings:  # on stderr: the lock may be what stdout carries
            print(f"warning: {line}", file=sys.stderr)
    if args.json:
        print_json("snapshot", {
            "venv": str(venv), "lock": str(output) if output else None,
            "requires_python": str(lock.requires_python) if lock.requires_python
            else None,
            "packages": [{"name": str(p.name),
                          "version": str(p.version) if p.version else None}
                         for p in lock.packages],
            "warnings": warnings})
    elif output is not None:
        say(args, str(output))
    else:
        print(render_lock(lock), end="")
    return 0


def _patches(args: argparse.Namespace, venv: Path, folder: Path) -> None:
    """The patch files and stanza; a line each on stderr (stdout may carry the
    snapshot)."""
    import sys

    from stacklock._fs import atomic_write_text
    from stacklock.snapshot import write_patches

    made = write_patches(venv, folder)
    for note in made.notes:
        print(f"stacklock: note: {note}", file=sys.stderr)
    if not made.files:
        print(f"stacklock: no edited files in {venv}: no patch written",
              file=sys.stderr)
        return
    stanza = atomic_write_text(folder / "patches.toml", made.stanza, shared=True)
    for path in made.files:
        print(f"stacklock: wrote {path}", file=sys.stderr)
    print(f"stacklock: wrote {stanza}: paste it into the profile (the file paths "
          "are as given to --patches: relative to the profile if that is where "
          "they are; say why in each reason)", file=sys.stderr)
