"""The report format, pinned by a real report from the H200 machine (one GPU: the
all-reduce is skipped with its reason, the matmul measured)."""

from __future__ import annotations

import json
from pathlib import Path

from stacklock.validate.report import (
    ValidateResult,
    render_markdown,
    render_text,
    write_report,
)

H200 = Path(__file__).parent / "data" / "validate" / "h200"


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
