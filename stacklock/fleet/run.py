"""Run the fleet playbook with a real ``ansible-playbook`` (ansible-core, the
``stacklock[fleet]`` extra) and gather the table.

Ansible does the fan-out, the connections and the forks; stacklock writes the
playbook, enables its callback plugin (``callback/stacklock_fleet.py``) so each
host's outcome lands in ``<dir>/<host>/ansible.json``, and reads the folder back.
A failed host never stops the others: the play runs every host to its end, and
Ansible's own exit code only tells whether the run started at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock._fs import atomic_write_text
from stacklock.errors import FleetError
from stacklock.fleet.playbook import render_playbook
from stacklock.fleet.report import FleetReport, load_fleet, write_fleet

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["CALLBACK_DIR", "FleetRun", "emit_playbook", "find_ansible_playbook",
           "run_fleet"]

CALLBACK_DIR = Path(__file__).resolve().parent / "callback"
# ansible-playbook: 0 all ok, 2 a host failed, 4 a host unreachable; others: the run
# itself broke (bad inventory or options, an internal error)
HOST_OUTCOMES = (0, 2, 4)


@dataclass(frozen=True, kw_only=True)
class FleetRun:
    fleet: FleetReport
    playbook: Path
    log: Path
    files: tuple[str, ...]
    ansible_exit: int


def find_ansible_playbook() -> str:
    """The ``ansible-playbook`` beside this interpreter first (the extra's), then
    PATH."""
    here = Path(sys.executable).parent / "ansible-playbook"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("ansible-playbook")
    if found is None:
        raise FleetError("ansible-playbook was not found (beside "
                         f"{sys.executable} or on PATH)",
                         hint="pip install 'stacklock[fleet]' (ansible-core)")
    return found


def _need_file(path: Path, what: str, hint: str) -> Path:
    if not path.exists():
        raise FleetError(f"{what} {path} does not exist", hint=hint)
    if what == "pack" and not path.is_file():
        raise FleetError(f"pack {path} is not a file", hint=hint)
    return path.resolve()


def emit_playbook(pack: Path, report_dir: Path, output: Path) -> Path:
    """Write the playbook for ``pack`` reporting into ``report_dir``."""
    pack = _need_file(pack, "pack", "make one with `stacklock pack LOCK -o PACK`")
    return atomic_write_text(output, render_playbook(pack, report_dir.resolve()),
                             shared=True)


def _ansible_env(report_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(CALLBACK_DIR)] + [p for p in env.get("ANSIBLE_CALLBACK_PLUGINS",
                                                      "").split(":") if p]
    enabled = [c for c in env.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if c]
    env.update(ANSIBLE_CALLBACK_PLUGINS=":".join(paths),
               ANSIBLE_CALLBACKS_ENABLED=",".join([*enabled, "stacklock_fleet"]),
               STACKLOCK_FLEET_DIR=str(report_dir), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    return env


def run_fleet(
    pack: Path,
    *,
    inventory: Path,
    report_dir: Path,
    limit: str | None = None,
    forks: int | None = None,
    on_line: Callable[[str], None] | None = None,
    check: Callable[[Path], object] | None = None,
) -> FleetRun:
    """Install ``pack`` on every host of ``inventory``, validate, gather reports.
    ``check(pack)`` reads the pack before any host gets it (the command hands in
    the pack's own reader: a lock refused there is refused here, in one line,
    with nothing run on any host).

    Raises ``FleetError`` when the run cannot start or no host ran; a host that
    fails or cannot be reached is a row of the returned table, not an error."""
    pack = _need_file(pack, "pack", "make one with `stacklock pack LOCK -o PACK`")
    inventory = _need_file(inventory, "inventory", "pass --inventory FILE "
                           "(an Ansible INI or YAML inventory)")
    if forks is not None and forks < 1:
        raise FleetError(f"--forks {forks} must be 1 or more")
    exe = find_ansible_playbook()
    if check is not None:
        check(pack)
    report_dir = report_dir.resolve()
    report_dir.mkdir(parents=True, exist_ok=True)
    playbook = atomic_write_text(report_dir / "playbook.yml",
                                 render_playbook(pack, report_dir))
    argv = [exe, "-i", str(inventory), str(playbook)]
    if limit:
        argv += ["--limit", limit]
    if forks:
        argv += ["--forks", str(forks)]
    log = report_dir / "ansible.log"
    with log.open("w", encoding="utf-8") as out:
        out.write("$ " + " ".join(argv) + "\n")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                errors="replace",
                                env=_ansible_env(report_dir), cwd=report_dir)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))
        code = proc.wait()
    if code not in HOST_OUTCOMES:
        lines = [ln.strip() for ln in log.read_text("utf-8").splitlines()[1:]]
        said = next((ln for ln in lines if ln.startswith("[ERROR]")),
                    next((ln for ln in reversed(lines) if ln), "no output"))
        where = f"{inventory}" + (f" --limit {limit}" if limit else "")
        raise FleetError(f"ansible-playbook exited {code} on {where}: {said}",
                         hint=f"see {log}")
    try:
        fleet = load_fleet(report_dir)
    except FleetError:
        raise FleetError(f"no host of {inventory} ran the playbook"
                         + (f" (--limit {limit})" if limit else ""),
                         hint=f"check the inventory with `ansible-inventory -i "
                         f"{inventory} --graph`; see {log}") from None
    files = write_fleet(fleet, report_dir)
    return FleetRun(fleet=fleet, playbook=playbook, log=log, files=files,
                    ansible_exit=code)
