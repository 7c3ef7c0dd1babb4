"""The fleet table: one row per host from ``<dir>/<host>/report.json`` (the validate
report the pack wrote there) and ``ansible.json`` (what Ansible did there), plus the
spread of the probe figures across hosts, so one slow node stands out.

``parse_host`` is pure (two dicts in, a row out); ``load_fleet`` reads a folder;
``write_fleet`` writes ``fleet.json`` and ``fleet.md`` beside the host folders.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stacklock._fs import atomic_write_text
from stacklock.bounded import parse_json, read_regular
from stacklock.errors import FleetError
from stacklock.fleet.playbook import INSTALL_TASK, VERDICT_TASK
from stacklock.validate.report import (
    MAX_REPORT_BYTES,  # a host's is ~20 kB
    ValidateResult,
)
from stacklock.words import counted

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "FLEET_VERSION",
    "FleetReport",
    "HostRow",
    "load_fleet",
    "parse_host",
    "render_fleet_markdown",
    "render_fleet_text",
    "write_fleet",
]

FLEET_VERSION = 1
PASS, FAIL, UNREACHABLE = "pass", "fail", "unreachable"
ALLREDUCE_BYTES = 42 * 1024
# a host this much slower than the fleet's median is marked in the table
SLOW_ALLREDUCE = 1.25   # all-reduce latency above 1.25x the median
SLOW_MATMUL = 0.8       # matmul rate below 0.8x the median


@dataclass(frozen=True, kw_only=True)
class HostRow:
    host: str
    verdict: str                       # pass | fail | unreachable
    why: str = ""                      # one line; empty for a pass
    failed_checks: tuple[str, ...] = ()
    install: str | None = None         # installed | matched | skipped | None
    driver: str | None = None
    gpus: int | None = None
    allreduce_42kb_us: float | None = None   # slowest rank, eager
    matmul_tflops: float | None = None       # slowest GPU

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "verdict": self.verdict, "why": self.why,
                "failed_checks": list(self.failed_checks), "install": self.install,
                "driver": self.driver, "gpus": self.gpus,
                "allreduce_42kb_us": self.allreduce_42kb_us,
                "matmul_tflops": self.matmul_tflops}


@dataclass(frozen=True, kw_only=True)
class Spread:
    """One probe figure across hosts: the worst host is the one to look at."""

    figure: str
    unit: str
    lowest: float
    median: float
    highest: float
    worst_host: str
    slow_hosts: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "unit": self.unit, "min": self.lowest,
                "median": self.median, "max": self.highest,
                "worst_host": self.worst_host, "slow_hosts": list(self.slow_hosts)}


@dataclass(frozen=True, kw_only=True)
class FleetReport:
    rows: tuple[HostRow, ...]
    spreads: tuple[Spread, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        return {v: sum(r.verdict == v for r in self.rows)
                for v in (PASS, FAIL, UNREACHABLE)}

    @property
    def ok(self) -> bool:
        return all(r.verdict == PASS for r in self.rows)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_dict(self) -> dict[str, Any]:
        return {"fleet_version": FLEET_VERSION,
                "verdict": PASS if self.ok else FAIL, "counts": self.counts,
                "hosts": [r.to_dict() for r in self.rows],
                "spread": [s.to_dict() for s in self.spreads]}


def _probe_figures(result: ValidateResult) -> tuple[float | None, float | None]:
    probes = result.probes
    if probes is None:
        return None, None
    at_42 = next((r.eager_us for r in probes.allreduce
                  if r.bytes == ALLREDUCE_BYTES), None)
    matmul = min(probes.matmul_tflops) if probes.matmul_tflops else None
    return at_42, matmul


def _driver(result: ValidateResult) -> str | None:
    for check in result.checks:
        if check.name == "driver":
            found = check.details.get("driver") or {}
            return found.get("version") if isinstance(found, dict) else None
    return None


def _install_action(run: dict[str, Any] | None) -> str | None:
    """installed; matched (the pack found the venv as locked and only validated);
    skipped (the stamp of the last passing run still held: nothing ran)."""
    actions = {"changed": "installed", "ok": "matched", "skipped": "skipped"}
    for task in (run or {}).get("tasks", ()):
        if task.get("task") == INSTALL_TASK:
            return actions.get(task.get("status", ""))
    return None


def parse_host(host: str, report: dict[str, Any] | None,
               run: dict[str, Any] | None) -> HostRow:
    """A row from a host's report.json and ansible.json (either may be missing)."""
    install = _install_action(run)
    status = (run or {}).get("status", "ok")
    if status == UNREACHABLE:
        return HostRow(host=host, verdict=UNREACHABLE, install=install,
                       why=f"{run.get('task')}: {run.get('why')}" if run else "")
    failed_task = (run or {}).get("task") if status == "failed" else None
    if failed_task and failed_task != VERDICT_TASK:
        return HostRow(host=host, verdict=FAIL, install=install,
                       why=f"{failed_task}: {(run or {}).get('why')}")
    if report is None:
        return HostRow(host=host, verdict=FAIL, install=install,
                       why="no report.json was fetched from this host")
    try:
        result = ValidateResult.from_dict(report)
    except (KeyError, TypeError, ValueError) as exc:
        return HostRow(host=host, verdict=FAIL, install=install,
                       why=f"report.json is not a stacklock validate report: {exc}")
    failed = tuple(c for c in result.all_checks if c.status == "fail")
    at_42, matmul = _probe_figures(result)
    gpus = result.venv_info.get("device_count")
    return HostRow(
        host=host, verdict=PASS if result.ok else FAIL,
        why="; ".join(f"{c.name}: {c.reason}" for c in failed),
        failed_checks=tuple(c.name for c in failed), install=install,
        driver=_driver(result), gpus=gpus if isinstance(gpus, int) else None,
        allreduce_42kb_us=at_42, matmul_tflops=matmul)


def _spread(rows: tuple[HostRow, ...], figure: str, unit: str, *,
            higher_is_worse: bool, limit: float) -> Spread | None:
    values = {r.host: getattr(r, figure) for r in rows
              if getattr(r, figure) is not None}
    if not values:
        return None
    median = statistics.median(values.values())
    pick = max if higher_is_worse else min
    worst = pick(sorted(values), key=lambda h: values[h])
    slow = tuple(h for h, v in sorted(values.items()) if len(values) > 1 and (
        v > median * limit if higher_is_worse else v < median * limit))
    return Spread(figure=figure, unit=unit, lowest=min(values.values()),
                  median=median, highest=max(values.values()), worst_host=worst,
                  slow_hosts=slow)


def make_fleet(rows: list[HostRow]) -> FleetReport:
    ordered = tuple(sorted(rows, key=lambda r: r.host))
    spreads = (_spread(ordered, "allreduce_42kb_us", "us", higher_is_worse=True,
                       limit=SLOW_ALLREDUCE),
               _spread(ordered, "matmul_tflops", "TFLOP/s", higher_is_worse=False,
                       limit=SLOW_MATMUL))
    return FleetReport(rows=ordered, spreads=tuple(s for s in spreads if s))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = parse_json(read_regular(path, limit=MAX_REPORT_BYTES))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"_unreadable": f"{path.name}: {exc}"}
    return data if isinstance(data, dict) else {"_unreadable": f"{path.name}: "
                                                "not a JSON object"}


def load_fleet(folder: Path) -> FleetReport:
    """Every ``<folder>/<host>/`` holding a report.json or an ansible.json."""
    if not folder.is_dir():
        raise FleetError(f"{folder} is not a folder",
                         hint="pass the --report DIR of `stacklock fleet install`")
    rows = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        report = _read_json(sub / "report.json")
        run = _read_json(sub / "ansible.json")
        if report is None and run is None:
            continue
        broken = next((d["_unreadable"] for d in (report, run)
                       if d and "_unreadable" in d), None)
        rows.append(HostRow(host=sub.name, verdict=FAIL, why=broken) if broken
                    else parse_host(sub.name, report, run))
    if not rows:
        raise FleetError(f"{folder} holds no host reports (<host>/report.json)",
                         hint="run `stacklock fleet install PACK --inventory INV "
                         f"--report {folder}` first")
    return make_fleet(rows)


def _num(value: float | None, spec: str, slow: bool) -> str:
    if value is None:
        return "-"
    return f"**{value:{spec}} slow**" if slow else format(value, spec)


def render_fleet_markdown(fleet: FleetReport) -> str:
    c = fleet.counts
    slow = {s.figure: set(s.slow_hosts) for s in fleet.spreads}
    lines = [f"# stacklock fleet: {'PASS' if fleet.ok else 'FAIL'}", "",
             f"{counted(len(fleet.rows), 'host')}: {c[PASS]} pass, {c[FAIL]} fail, "
             f"{c[UNREACHABLE]} unreachable", "",
             "| host | verdict | install | driver | GPUs | all-reduce 42 KB (us) "
             "| matmul (TFLOP/s, slowest GPU) | failed checks / why |",
             "|---|---|---|---|---|---|---|---|"]
    for r in fleet.rows:
        why = r.why.replace("|", "\\|").replace("\n", " ")
        at_42 = _num(r.allreduce_42kb_us, ".1f",
                     r.host in slow.get("allreduce_42kb_us", ()))
        matmul = _num(r.matmul_tflops, ".0f", r.host in slow.get("matmul_tflops", ()))
        lines.append(
            f"| {r.host} | {r.verdict.upper()} | {r.install or '-'} | "
            f"{r.driver or '-'} | {'-' if r.gpus is None else r.gpus} | "
            f"{at_42} | {matmul} | {why or '-'} |")
    if fleet.spreads:
        lines += ["", "## Spread across hosts", "",
                  "| figure | min | median | max | worst host |",
                  "|---|---|---|---|---|"]
        for s in fleet.spreads:
            lines.append(f"| {s.figure} ({s.unit}) | {s.lowest:.1f} | {s.median:.1f} "
                         f"| {s.highest:.1f} | {s.worst_host} |")
    return "\n".join(lines) + "\n"


def render_fleet_text(fleet: FleetReport) -> str:
    """The terminal summary: one line per host, then the verdict."""
    width = max(len(r.host) for r in fleet.rows)
    lines = [f"{r.verdict.upper():11}  {r.host:<{width}}  {r.why or 'ok'}"
             for r in fleet.rows]
    c = fleet.counts
    lines.append(f"{'PASS' if fleet.ok else 'FAIL'}: {c[PASS]} pass, {c[FAIL]} fail, "
                 f"{c[UNREACHABLE]} unreachable")
    return "\n".join(lines)


def write_fleet(fleet: FleetReport, folder: Path) -> tuple[str, str]:
    text = json.dumps(fleet.to_dict(), indent=2, sort_keys=True) + "\n"
    return (str(atomic_write_text(folder / "fleet.json", text, shared=True)),
            str(atomic_write_text(folder / "fleet.md", render_fleet_markdown(fleet),
                                  shared=True)))
