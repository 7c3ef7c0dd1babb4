"""The fleet table from gathered reports: rows, verdicts, the spread of probe
figures, and ``stacklock fleet report`` on a folder. Host reports are copies of the
real H200 validate report (tests/data/validate/h200/report.json)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stacklock.errors import FleetError
from stacklock.fleet import load_fleet, parse_host, render_fleet_markdown, write_fleet
from stacklock.fleet.playbook import INSTALL_TASK, VERDICT_TASK
from stacklock.fleet.report import make_fleet

H200 = (Path(__file__).resolve().parents[1] / "data" / "validate" / "h200"
        / "report.json")


def _real() -> dict[str, Any]:
    return json.loads(H200.read_text())


def _passing() -> dict[str, Any]:
    """The real report with its one failed check (163 packages the machine has
    beyond the lock) marked passed, as on a node that holds only the lock. The real
    machine has one GPU, so its all-reduce was skipped; a node of two GPUs is given
    a 42 KB row here (figures for the spread, not a measurement)."""
    data = _real()
    for check in data["checks"]:
        if check["name"] == "distributions":
            check.update(status="pass", reason="as locked")
    data["verdict"] = "pass"
    data["probes"].update(world=2, allreduce_skipped=None, allreduce_correct=True,
                          allreduce=[{"bytes": 43008, "size": "42 KB",
                                      "eager_us": 30.0, "graph_us": 12.0,
                                      "busbw_gbps": 3.584}])
    return data


def _at_42(data: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in data["probes"]["allreduce"] if r["size"] == "42 KB")


def _slow_node() -> dict[str, Any]:
    """A node with a bad link and a throttled GPU: the real figures, 42 KB
    all-reduce twice as slow and the matmul rate halved."""
    data = _passing()
    _at_42(data)["eager_us"] *= 2
    data["probes"]["matmul_tflops"] = [t / 2 for t in data["probes"]["matmul_tflops"]]
    return data


def _ran(status: str = "ok", task: str | None = None, why: str | None = None,
         install: str = "changed") -> dict[str, Any]:
    run: dict[str, Any] = {"host": "h", "status": status,
                           "tasks": [{"task": INSTALL_TASK, "status": install}]}
    if task:
        run.update(task=task, why=why)
    return run


def _write_host(folder: Path, host: str, report: dict[str, Any] | None,
                run: dict[str, Any] | None) -> None:
    (folder / host).mkdir(parents=True)
    if report is not None:
        (folder / host / "report.json").write_text(json.dumps(report))
    if run is not None:
        (folder / host / "ansible.json").write_text(json.dumps(run))


def test_row_from_the_real_h200_report() -> None:
    data = _real()
    row = parse_host("h200", data, _ran(status="failed", task=VERDICT_TASK,
                                        why="validate failed"))
    assert row.verdict == "fail" and row.failed_checks == ("distributions",)
    assert row.why.startswith("distributions: ")
    driver = next(c for c in data["checks"] if c["name"] == "driver")
    assert row.driver == driver["details"]["driver"]["version"]
    assert row.gpus == data["venv"]["device_count"] == 1
    assert row.allreduce_42kb_us is None  # one GPU: the all-reduce was skipped
    assert row.matmul_tflops == min(data["probes"]["matmul_tflops"])
    assert row.install == "installed"


def test_slow_node_stands_out() -> None:
    fast, slow = _passing(), _slow_node()
    rows = [parse_host("node-a", fast, _ran()), parse_host("node-b", fast, _ran()),
            parse_host("node-c", slow, _ran())]
    fleet = make_fleet(rows)
    assert fleet.ok and fleet.exit_code == 0
    spread = {s.figure: s for s in fleet.spreads}
    allreduce, matmul = spread["allreduce_42kb_us"], spread["matmul_tflops"]
    assert allreduce.worst_host == matmul.worst_host == "node-c"
    assert allreduce.slow_hosts == matmul.slow_hosts == ("node-c",)
    assert allreduce.highest == _at_42(slow)["eager_us"]
    assert allreduce.median == _at_42(fast)["eager_us"]
    md = render_fleet_markdown(fleet)
    row_c = next(line for line in md.splitlines() if line.startswith("| node-c"))
    assert row_c.count(" slow**") == 2
    assert all(" slow**" not in line for line in md.splitlines()
               if line.startswith(("| node-a", "| node-b")))


def test_failed_and_unreachable_hosts_say_why() -> None:
    broken = parse_host("node-x", None, _ran(
        status="failed", task="make the work folder",
        why="The module interpreter '/nope/python3' was not found"))
    assert broken.verdict == "fail" and "/nope/python3" in broken.why
    assert broken.why.startswith("make the work folder: ")
    gone = parse_host("node-y", None, _ran(
        status="unreachable", task="make the work folder",
        why="Failed to connect to the host via ssh"))
    assert gone.verdict == "unreachable" and "via ssh" in gone.why
    nothing = parse_host("node-z", None, _ran())
    assert nothing.verdict == "fail" and "no report.json" in nothing.why
    fleet = make_fleet([gone, broken, nothing])
    assert fleet.counts == {"pass": 0, "fail": 2, "unreachable": 1}
    assert [r.host for r in fleet.rows] == ["node-x", "node-y", "node-z"]
    assert fleet.exit_code == 1 and fleet.spreads == ()


@pytest.mark.parametrize(("task_status", "shown"), [
    ("changed", "installed"),  # the pack built a new venv generation
    ("ok", "matched"),         # the pack found the venv as locked, validated only
    ("skipped", "skipped"),    # the stamp of the last passing run held
])
def test_install_action_is_shown(task_status: str, shown: str) -> None:
    row = parse_host("node-a", _passing(), _ran(install=task_status))
    assert row.verdict == "pass" and row.install == shown


def test_a_stale_report_is_not_trusted_when_the_install_failed() -> None:
    row = parse_host("node-a", _passing(), _ran(
        status="failed", task=INSTALL_TASK, why="rc 2: stacklock: error: tampered"))
    assert row.verdict == "fail" and "tampered" in row.why


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stacklock", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_fleet_report_cli_re_renders(tmp_path: Path) -> None:
    _write_host(tmp_path, "node-a", _passing(), _ran())
    _write_host(tmp_path, "node-b", _slow_node(), _ran(install="skipped"))
    _write_host(tmp_path, "node-c", None, _ran(
        status="failed", task="copy the pack", why="No space left on device"))
    (tmp_path / "not-a-host").mkdir()
    proc = _cli("fleet", "report", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert [h["host"] for h in data["hosts"]] == ["node-a", "node-b", "node-c"]
    assert [h["verdict"] for h in data["hosts"]] == ["pass", "pass", "fail"]
    assert data["counts"] == {"pass": 2, "fail": 1, "unreachable": 0}
    assert "No space left on device" in data["hosts"][2]["why"]
    assert (tmp_path / "fleet.md").read_text() == render_fleet_markdown(
        load_fleet(tmp_path))
    assert "node-c" in proc.stdout and proc.stdout.rstrip().endswith(
        f"report: {tmp_path / 'fleet.md'}")


def test_write_fleet_is_deterministic(tmp_path: Path) -> None:
    _write_host(tmp_path, "b", _passing(), _ran())
    _write_host(tmp_path, "a", _slow_node(), None)
    first = [Path(p).read_bytes() for p in write_fleet(load_fleet(tmp_path), tmp_path)]
    second = [Path(p).read_bytes() for p in write_fleet(load_fleet(tmp_path), tmp_path)]
    assert first == second


def test_unreadable_report_is_a_failed_row(tmp_path: Path) -> None:
    (tmp_path / "node-a").mkdir()
    (tmp_path / "node-a" / "report.json").write_text("{truncated")
    other = copy.deepcopy(_real())
    other["report_version"] = 99
    _write_host(tmp_path, "node-b", other, None)
    rows = load_fleet(tmp_path).rows
    assert rows[0].verdict == "fail" and "report.json" in rows[0].why
    assert rows[1].verdict == "fail" and "report_version 99" in rows[1].why


@pytest.mark.parametrize("make", ["missing", "empty", "file"])
def test_fleet_report_bad_folder_is_one_line_exit_2(tmp_path: Path,
                                                    make: str) -> None:
    folder = tmp_path / "fleet"
    if make == "empty":
        folder.mkdir()
    elif make == "file":
        folder.write_text("x")
    proc = _cli("fleet", "report", str(folder))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(folder) in proc.stderr
    with pytest.raises(FleetError):
        load_fleet(folder)
