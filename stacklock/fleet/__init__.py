"""Roll one pack out to a fleet with Ansible and gather one table of verdicts.

``run_fleet(pack, inventory=..., report_dir=...)`` runs the generated playbook
(:mod:`stacklock.fleet.playbook`) with ``ansible-playbook``; ``load_fleet(dir)``
re-reads the gathered reports; ``write_fleet`` writes ``fleet.json`` and
``fleet.md``. Ansible is the optional extra ``stacklock[fleet]``; nothing here
imports it (its callback plugin is loaded by ``ansible-playbook`` itself).
"""

from __future__ import annotations

from stacklock.fleet.playbook import DEFAULT_VENV, render_playbook
from stacklock.fleet.report import (
    FleetReport,
    HostRow,
    load_fleet,
    parse_host,
    render_fleet_markdown,
    render_fleet_text,
    write_fleet,
)
from stacklock.fleet.run import FleetRun, emit_playbook, run_fleet

__all__ = [
    "DEFAULT_VENV",
    "FleetReport",
    "FleetRun",
    "HostRow",
    "emit_playbook",
    "load_fleet",
    "parse_host",
    "render_fleet_markdown",
    "render_fleet_text",
    "render_playbook",
    "run_fleet",
    "write_fleet",
]
