"""The report format, pinned by a real report from the H200 machine (one GPU: the
all-reduce is skipped with its reason, the matmul measured)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stacklock.validate.report import (
    PLOTS_HINT,
    ValidateResult,
    render_markdown,
    render_text,
    write_report,
)

H200 = Path(__file__).resolve().parents[1] / "data" / "validate" / "h200"


def _real() -> tuple[dict, ValidateResult]:
    data = json.loads((H200 / "report.json").read_text())
    return data, ValidateResult.from_dict(data)


def test_real_report_round_trips() -> None:
    data, result = _real()
    assert result.to_dict() == data


def test_real_report_markdown_is_stable() -> None:
    _, result = _real()
    assert render_markdown(result) == (H200 / "report.md").read_text()


def test_real_report_content() -> None:
    data, result = _real()
    assert data["verdict"] == "fail" and result.exit_code == 1
    failed = [c.name for c in result.all_checks if c.status == "fail"]
    assert failed == ["distributions"]  # the machine holds 163 unlocked packages
    checks = {c.name: c for c in result.all_checks}
    assert checks["allreduce"].status == "skip"
    assert checks["allreduce"].reason.startswith("1 GPU: an all-reduce needs 2")
    assert checks["matmul"].status == "pass"  # the profile asks for 600 TFLOP/s
    probes = result.probes
    assert probes is not None and probes.world == 1 and probes.allreduce == ()
    assert probes.matmul_tflops[0] > 600
    assert result.venv_info["devices"][0]["sm"] == "sm_90"
    assert "sm_90" in result.venv_info["arch_list"]
    assert data["counts"] == {"pass": 14, "fail": 1, "skip": 1, "measured": 0}
    text = render_text(result)
    assert text.splitlines()[-1] == ("FAIL: 14 passed, 1 failed, 1 skipped, "
                                     "0 measured (no threshold)")
    kept = (H200 / "validate.txt").read_text().splitlines()
    assert [ln for ln in kept if not ln.startswith(("report:", "name,", "NVIDIA"))] \
        == text.splitlines()


def test_write_report_files(tmp_path: Path) -> None:
    _, result = _real()
    files = [Path(f) for f in write_report(result, tmp_path / "out")]
    assert [f.name for f in files] == ["report.json", "report.md"]  # nothing to plot
    assert json.loads(files[0].read_text()) == result.to_dict()


def test_every_check_skipped_is_not_a_pass() -> None:
    """The real H200 report with only its skipped checks kept: nothing was
    checked, which exits 1 and says so, rather than PASS."""
    data, real = _real()
    skipped = tuple(c for c in real.checks if c.status == "skip")
    assert skipped and len(skipped) < len(real.checks)
    empty = ValidateResult(lock=real.lock, python=real.python, checks=skipped)
    assert empty.ok and empty.verdict == "nothing checked" and empty.exit_code == 1
    assert empty.to_dict()["verdict"] == "nothing checked"
    lines = render_text(empty).splitlines()
    assert lines[-2].startswith(f"NOTHING CHECKED: 0 passed, 0 failed, "
                                f"{len(skipped)} skipped")
    assert lines[-1] == "every check was skipped: see the reasons above"
    assert real.verdict == data["verdict"]  # the recorded verdict still reads back


def _with_allreduce() -> ValidateResult:
    """The real report with all-reduce rows (as a 2-GPU node gives): a plot to draw."""
    data, _ = _real()
    data["probes"]["allreduce"] = [
        {"bytes": 1 << k, "eager_us": 20.0 + k, "graph_us": 8.0 + k}
        for k in range(10, 20, 3)]
    return ValidateResult.from_dict(data)


def test_write_report_plots_with_matplotlib(tmp_path: Path) -> None:
    files = [Path(f) for f in write_report(_with_allreduce(), tmp_path)]
    assert [f.name for f in files] == ["report.json", "report.md", "allreduce.png"]
    assert files[2].read_bytes().startswith(b"\x89PNG")
    assert PLOTS_HINT not in files[1].read_text()


_WITHOUT_MATPLOTLIB = """
import json, sys
from pathlib import Path

sys.modules["matplotlib"] = None  # Python's own block: import raises, find_spec is None
from tests.integration.test_validate_report import _with_allreduce
from stacklock.validate.report import has_matplotlib, write_report
files = write_report(_with_allreduce(), Path(sys.argv[1]))
print(json.dumps({"files": files, "has": has_matplotlib(),
                  "loaded": sorted(m for m in sys.modules if "matplotlib" in m
                                   and sys.modules[m] is not None)}))
"""


def test_write_report_without_matplotlib(tmp_path: Path) -> None:
    """matplotlib not importable (blocked in ``sys.modules``, as for an install
    without the plots extra): the report without plots, one line why."""
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_MATPLOTLIB, str(tmp_path)],
                          capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    out = json.loads(proc.stdout)
    assert out["has"] is False and out["loaded"] == []
    assert [Path(f).name for f in out["files"]] == ["report.json", "report.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]
    md = (tmp_path / "report.md").read_text()
    assert md == render_markdown(_with_allreduce()) + f"\n{PLOTS_HINT}\n"
    assert md.splitlines()[-1] == ("plots need matplotlib: "
                                   "pip install 'stacklock[plots]'")
