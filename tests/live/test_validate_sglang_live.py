"""Live: the gate's preflight against the real SGLang from PyPI.

The venv holds sglang with ``--no-deps`` plus exactly what importing its argument
parser needs (tests/data/validate/sglang_parser/requirements.txt): torch and the
NVIDIA libraries its CUDA wheel loads come to about 4 GB, downloaded once and kept
in a cached venv keyed by the file's sha256. It is worth it because the stand-in in
tests/data cannot say what the real parser accepts; only the real one can.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.validate.gate import run_gate, server_env
from stacklock.validate.gate_preflight import check_server_args
from stacklock.validation import GateConfig

pytestmark = pytest.mark.live

REQUIREMENTS = (Path(__file__).resolve().parents[1] / "data" / "validate"
                / "sglang_parser"
                / "requirements.txt")


def _cache_root() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "stacklock-tests"


@pytest.fixture(scope="module")
def sglang_python() -> Path:
    """The cached venv; built in a side folder and renamed into place when whole."""
    from uv import find_uv_bin

    text = REQUIREMENTS.read_bytes()
    tag = f"{sys.version_info.major}{sys.version_info.minor}"
    digest = hashlib.sha256(text).hexdigest()[:16]
    final = _cache_root() / f"sglang-parser-py{tag}-{digest}"
    python = final / "bin" / "python"
    if python.exists():
        return python
    building = final.with_name(f"{final.name}.{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    uv = str(find_uv_bin())
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    for argv in ([uv, "venv", "-q", "--python", sys.executable, str(building)],
                 [uv, "pip", "install", "-q", "--no-deps", "--python",
                  str(building / "bin" / "python"), "-r", str(REQUIREMENTS)]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env,
                              check=False)
        assert proc.returncode == 0, proc.stderr
    try:
        building.rename(final)
    except OSError:  # built meanwhile by another run: keep that one
        shutil.rmtree(building, ignore_errors=True)
    return python


def _argv(*args: str) -> list[str]:
    return ["--model-path", "moonshotai/Kimi-K2.5", "--host", "127.0.0.1",
            "--port", "30000", *args]


def test_real_parser_accepts_real_flags_and_names_a_typo(sglang_python: Path) -> None:
    """One run of the parser for four argument lists (each import costs seconds)."""
    result = check_server_args(sglang_python, {
        "plain": _argv("--tp", "8", "--trust-remote-code"),
        "eagle": _argv("--tp", "8", "--speculative-algorithm", "EAGLE3",
                       "--speculative-num-steps", "3"),
        "typo": _argv("--tp-szie", "8"),
        "choice": _argv("--attention-backend", "flashinfr")},
        env=server_env(GateConfig(model="m")))
    assert (result.status, result.details["sglang"]) == ("fail", "0.5.23")
    assert result.reason.startswith("sglang 0.5.23 rejects the server arguments "
                                    "(typo: unrecognized arguments: --tp-szie 8; "
                                    "choice: argument --attention-backend: invalid "
                                    "choice: 'flashinfr'")
    assert "plain" not in result.reason and "eagle" not in result.reason


def test_gate_stops_at_the_typo_without_launching(sglang_python: Path,
                                                  tmp_path: Path) -> None:
    config = GateConfig(engine="sglang", model="moonshotai/Kimi-K2.5",
                        server_args=("--tp", "8", "--mem-fraction-statc", "0.9"))
    result = run_gate(config, python=sglang_python, log_dir=tmp_path)
    assert result.phases == ()
    assert [(c.name, c.status) for c in result.checks] == [("gate-preflight", "fail")]
    assert result.checks[0].reason == (
        "sglang 0.5.23 rejects the server arguments (baseline: unrecognized "
        "arguments: --mem-fraction-statc 0.9)")
    assert not list(tmp_path.iterdir())  # no server log: nothing was started
