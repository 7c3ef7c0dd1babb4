"""``stacklock fleet``: install a pack on every host of an Ansible inventory and
gather one table of verdicts; ``fleet report`` re-renders it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.cli.output import interactive, print_json, say
from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import argparse

__all__ = ["fleet_install", "fleet_report"]


def _echo(line: str) -> None:
    print(line, file=sys.stderr)


def fleet_install(args: argparse.Namespace) -> int:
    from stacklock.fleet.report import render_fleet_text
    from stacklock.fleet.run import emit_playbook, run_fleet

    if args.emit_playbook:
        path = emit_playbook(Path(args.pack), Path(args.report),
                             Path(args.emit_playbook))
        say(args, f"wrote {path}; run it with: ansible-playbook -i INVENTORY {path}")
        return 0
    if args.inventory is None:
        raise StacklockError("fleet install needs --inventory INV",
                             hint="an Ansible inventory file, e.g. hosts.ini")
    from stacklock.pack.install import check_pack

    run = run_fleet(Path(args.pack), inventory=Path(args.inventory),
                    report_dir=Path(args.report), limit=args.limit,
                    forks=args.forks,
                    on_line=_echo if interactive(args) else None, check=check_pack)
    if args.json:
        print_json("fleet", run.fleet.to_dict())
    else:
        say(args, render_fleet_text(run.fleet))
        for name in (*run.files, str(run.log)):
            say(args, f"report: {name}")
    return run.fleet.exit_code


def fleet_report(args: argparse.Namespace) -> int:
    from stacklock.fleet.report import load_fleet, render_fleet_text, write_fleet

    folder = Path(args.dir)
    fleet = load_fleet(folder)
    files = write_fleet(fleet, folder)
    if args.json:
        print_json("fleet", fleet.to_dict())
    else:
        say(args, render_fleet_text(fleet))
        for name in files:
            say(args, f"report: {name}")
    return fleet.exit_code
