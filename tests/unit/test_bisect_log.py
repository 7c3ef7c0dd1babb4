"""A bisect's log (bisect.log.jsonl) is read back on resume: a broken or crafted
one is one error naming the file and line, a line cut by an interruption runs
that step again, a log of another bisect is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stacklock.bisect.steps import StepLog
from stacklock.errors import StacklockError

HEADER = {"good": "a.toml", "bad": "b.toml", "oracle": ["true"]}
STEP = {"step": 1, "applied": ["numpy"], "state": "bad", "exit_code": 1,
        "seconds": 0.5}


def _log(tmp_path: Path, *lines: str | bytes) -> Path:
    path = tmp_path / "bisect.log.jsonl"
    StepLog(path, HEADER)  # writes the header the way a first run does
    with path.open("ab") as fh:
        for line in lines:
            fh.write(line if isinstance(line, bytes) else line.encode())
    return path


def test_a_logged_step_is_read_back_and_a_cut_line_is_run_again(
        tmp_path: Path) -> None:
    path = _log(tmp_path, json.dumps(STEP) + "\n", '{"step": 2, "appl')
    log = StepLog(path, HEADER)
    assert list(log.earlier) == [("numpy",)]
    assert log.earlier[("numpy",)].state == "bad" and log.count == 1


@pytest.mark.parametrize("line", [
    "[1, 2]\n",                                     # JSON, but not an object
    '{"step": 1, "applied": "numpy", "state": "bad"}\n',  # applied not a list
    '{"step": "one", "applied": [], "state": "bad"}\n',   # not a number
    '{"applied": [], "state": "bad"}\n',                  # no step
])
def test_a_crafted_step_line_is_one_error_naming_file_and_line(
        tmp_path: Path, line: str) -> None:
    path = _log(tmp_path, json.dumps(STEP) + "\n", line)
    with pytest.raises(StacklockError, match=rf"{path}:3: not a bisect step"):
        StepLog(path, HEADER)


def test_binary_bytes_and_another_bisects_log_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bisect.log.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(StacklockError, match="not a bisect log"):
        StepLog(path, HEADER)
    other = _log(tmp_path / "other")
    with pytest.raises(StacklockError, match="of other locks or another oracle"):
        StepLog(other, {**HEADER, "bad": "c.toml"})
