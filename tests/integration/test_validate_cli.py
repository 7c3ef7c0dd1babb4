"""``stacklock validate`` end to end: a real venv, a lock, the gate, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stacklock.cli import main
from tests.helpers.jsonout import parse_output
from tests.helpers.wheelkit import build_wheel, make_venv, uv_install, write_lock

FAKE = Path(__file__).resolve().parents[1] / "data" / "validate" / "fake_sglang"

GATE = """imports = ["tinypkg"]

[tool.stacklock.validate.gate]
engine = "sglang"
model = "test/model"
server-args = ["--fake-ttft", "0.02", "--fake-step", "0.02"]
speculative-args = ["--speculative-algorithm", "EAGLE3", "--fake-accept", "3"]
input-tokens = 16
output-tokens = 12
concurrency = [1, 2]
rounds = 1
startup-timeout = 60
"""


@pytest.fixture
def venv(tmp_path: Path) -> tuple[Path, Path]:
    wheel = build_wheel(tmp_path / "w", "tinypkg", "1.0",
                        {"tinypkg/__init__.py": b"__version__ = '1.0'\n"})
    python = make_venv(tmp_path / "venv")
    uv_install(python, wheel)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    (site / "fake_sglang.pth").write_text(str(FAKE) + "\n")
    return tmp_path / "venv", wheel


def test_all_pass_with_gate_and_report(venv: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    folder, wheel = venv
    lock = write_lock(tmp_path / "pylock.toml", [wheel], validate=GATE)
    report = tmp_path / "report"
    code = main(["validate", str(lock), "--venv", str(folder), "--report", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[-1].startswith("PASS: ")
    marks = {line.split()[1]: line.split()[0] for line in lines[:-1]
             if not line.startswith("report:")}
    assert marks["import:tinypkg"] == "PASS" and marks["gate-preflight"] == "PASS"
    # no min-tokens-per-second, no min-speedup: numbers, not verdicts
    assert marks["gate-throughput"] == marks["gate-speedup"] == "measured"
    assert sorted(p.name for p in report.iterdir()) == [
        "report.json", "report.md", "server-baseline.log", "server-speculative.log",
        "throughput.png"]
    data = json.loads((report / "report.json").read_text())
    phases = data["gate"]["phases"]
    assert [p["name"] for p in phases] == ["baseline", "speculative"]
    assert [lv["concurrency"] for lv in phases[1]["levels"]] == [1, 2]
    assert (report / "throughput.png").read_bytes().startswith(b"\x89PNG")
    md = (report / "report.md").read_text()
    assert "## Throughput gate" in md
    assert "| ITL ms per chunk | ITL ms per token |" in md
    assert "warm-up requests per phase, not measured: 1" in md
    assert data["counts"]["measured"] == 2 and phases[1]["warmup_requests"] == 1


def test_failed_check_exits_1_json(venv: tuple[Path, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder = venv[0]
    other = build_wheel(tmp_path / "other", "tinypkg", "2.0", {"tinypkg/x.py": b""})
    lock = write_lock(tmp_path / "pylock.toml", [other])
    code = main(["validate", str(lock), "--venv", str(folder), "--no-gate", "--json"])
    data = parse_output(capsys.readouterr().out)
    assert code == 1
    assert data["verdict"] == "fail"
    failed = [c for c in data["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["distributions"]
    assert failed[0]["reason"] == "1 at another version (tinypkg 1.0 (locked 2.0))"


def test_cannot_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--venv", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stacklock: error: {tmp_path / 'nope'}/bin/python does not "
                          "exist")
    bad = tmp_path / "pylock.toml"
    bad.write_text('lock-version = "1.0"\n[[packages]]\nname = "X_Y"\n')
    python = make_venv(tmp_path / "venv")
    assert main(["validate", str(bad), "--python", str(python)]) == 2
    assert "not a PEP 751 lock" in capsys.readouterr().err
    real = FAKE.parent / "h200" / "pylock.h200-cu130.toml"
    future = tmp_path / "future.toml"
    future.write_text(real.read_text().replace("[tool.stacklock]\nlock-version = 1",
                                               "[tool.stacklock]\nlock-version = 9"))
    assert main(["validate", str(future), "--python", str(python)]) == 2
    assert "tool.stacklock.lock-version 9 is not supported" in capsys.readouterr().err


def test_no_lock_says_what_it_checked(venv: tuple[Path, Path],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Without a LOCK most checks cannot run: the verdict names the few that did
    instead of a bare PASS."""
    code = main(["validate", "--venv", str(venv[0])])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[-2].startswith("PASS without a LOCK (checked: uv-pip-check): "
                                "1 passed, 0 failed, 6 skipped")
    assert lines[-1] == ("pass the LOCK the venv was installed from to check the "
                         "venv against it")
    marks = {line.split()[1]: line.split()[0] for line in lines[:-2]}
    assert marks["distributions"] == marks["toolkit"] == "skip"


def _no_gpu() -> bool:
    import shutil

    return not (Path("/proc/driver/nvidia/version").exists()
                or shutil.which("nvidia-smi"))


@pytest.mark.skipif(not _no_gpu(), reason="this machine has an NVIDIA driver")
def test_allow_no_gpu_skips_the_driver_and_the_gate(
        venv: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An image build: no driver, no GPU. The driver check and the gate (its
    server would need the GPUs) are skipped with their reasons, not failed."""
    folder, wheel = venv
    monkeypatch.delenv("STACKLOCK_DRIVER_VERSION", raising=False)
    cuda = '[tool.stacklock.cuda]\nversion = "13.0.3"\nsource = "pypi"\n'
    lock = write_lock(tmp_path / "pylock.toml", [wheel], validate=GATE,
                      extra_tool=cuda)
    assert main(["validate", str(lock), "--venv", str(folder), "--no-gate",
                 "--json"]) == 1
    failed = {c["name"] for c in parse_output(capsys.readouterr().out)["checks"]
              if c["status"] == "fail"}
    assert "driver" in failed
    code = main(["validate", str(lock), "--venv", str(folder), "--allow-no-gpu",
                 "--json"])
    data = parse_output(capsys.readouterr().out)
    assert code == 0, data
    status = {c["name"]: (c["status"], c["reason"]) for c in data["checks"]}
    assert status["driver"][0] == "skip"
    assert status["driver"][1].startswith("no driver here (--allow-no-gpu): ")
    assert status["gate"] == ("skip", "no GPU here to serve test/model "
                                      "(--allow-no-gpu)")
    assert data["gate"] is None and status["import:tinypkg"][0] == "pass"
