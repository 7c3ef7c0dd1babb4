"""docs/performance.md stays a reader's document: fewer than 300 lines of current
figures (the history of each lives in commit messages), each script it tells a reader
to run exists and takes the flags it is given there, and each repository file it names
is there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
# "scripts/bench_x.py --flag VALUE ..." up to the end of the line or of the inline code
SCRIPT_CALL = re.compile(r"scripts/(\w+\.py)([^`\n]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
REPO_PATH = re.compile(
    r"(?<![\w./<>-])((?:scripts|tests|locks|stacklock|docs|profiles)/[\w./-]*[\w/])")


def test_performance_doc_is_under_300_lines() -> None:
    lines = DOC.read_text().splitlines()
    assert len(lines) < 300, f"docs/performance.md has {len(lines)} lines"


def test_each_script_command_runs_a_script_with_flags_it_takes() -> None:
    calls = SCRIPT_CALL.findall(DOC.read_text())
    assert len(calls) >= 8
    for script, args in calls:
        source = ROOT / "scripts" / script
        assert source.is_file(), f"scripts/{script} does not exist"
        code = source.read_text()
        for flag in FLAG.findall(args):
            assert f'"{flag}"' in code, f"scripts/{script} takes no {flag}"


def test_each_file_named_exists() -> None:
    paths = REPO_PATH.findall(DOC.read_text())
    assert len(paths) >= 10
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, missing
