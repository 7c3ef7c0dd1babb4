"""The report format, pinned by a real report from the H200 machine."""

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
    assert failed == ["distributions"]  # the machine holds 164 unlocked packages
    assert result.probes is not None
    sizes = [r.bytes for r in result.probes.allreduce]
    assert sizes[0] == 4096 and sizes[-1] == 4 * 1024 * 1024 and 43008 in sizes
    assert result.probes.world == 1 and result.probes.allreduce_correct
    assert result.venv_info["devices"][0]["sm"] == "sm_90"
    assert "sm_90" in result.venv_info["arch_list"]
    text = render_text(result)
    assert text.splitlines()[-1] == "FAIL: 15 passed, 1 failed, 0 skipped"


def test_write_report_files(tmp_path: Path) -> None:
    _, result = _real()
    files = [Path(f) for f in write_report(result, tmp_path / "out")]
    assert [f.name for f in files] == ["report.json", "report.md", "allreduce.png"]
    assert json.loads(files[0].read_text()) == result.to_dict()
    png = files[2].read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
