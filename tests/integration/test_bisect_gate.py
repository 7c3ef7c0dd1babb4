"""``stacklock bisect --gate`` end to end: the lock's validation gate is the oracle.

The locks carry the SGLang stand-in of tests/data/validate/fake_sglang as a real
``sglang`` wheel: 1.0 streams a token every 10 ms, 1.1 every 40 ms (its own
``--fake-step`` default), the throughput regression to find; alpha changes too,
harmlessly. Each state's venv is made by uv, its server launched by the real gate
from the venv's python, and measured ``--repeat`` times.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stacklock.cli import main
from tests.helpers.install_server import Served
from tests.helpers.jsonout import parse_output
from tests.helpers.wheelkit import build_wheel, sha256

FAKE = Path(__file__).resolve().parents[1] / "data" / "validate" / "fake_sglang"
GATE = """
[tool.stacklock]
lock-version = 1
[tool.stacklock.validate.gate]
engine = "sglang"
model = "test/model"
server-args = ["--fake-ttft", "0.01"]
input-tokens = 16
output-tokens = 12
concurrency = [1]
rounds = 2
startup-timeout = 60.0
shutdown-timeout = 10.0
"""


def _sglang(folder: Path, version: str, step: str) -> Path:
    files = {}
    for path in sorted(FAKE.rglob("*.py")):
        data = path.read_bytes()
        if path.name == "server_args.py":
            data = data.replace(b'"--fake-step", type=float, default=0.01',
                                f'"--fake-step", type=float, default={step}'.encode())
        files[str(path.relative_to(FAKE))] = data
    return build_wheel(folder, "sglang", version, files)


def _lock(path: Path, base: str, served: Served, sglang: tuple[str, str],
          alpha: str) -> Path:
    folder = path.parent / "wheels"
    wheels = [_sglang(folder, *sglang),
              build_wheel(folder, "alpha", alpha, {"alpha.py": b"X = 1\n"})]
    lines = ['lock-version = "1.0"', 'created-by = "tests"',
             'requires-python = ">=3.11"', ""]
    for wheel in sorted(wheels):
        name, version = wheel.name.split("-")[:2]
        served.files[f"/files/{wheel.name}"] = wheel.read_bytes()
        lines += ["[[packages]]", f'name = "{name}"', f'version = "{version}"',
                  "[[packages.wheels]]", f'url = "{base}/files/{wheel.name}"',
                  f'hashes = {{sha256 = "{sha256(wheel)}"}}', ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + GATE, "utf-8")
    return path


def test_gate_bisect_names_the_throughput_regression(
    server: tuple[str, Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)
    base, served = server
    good = _lock(tmp_path / "good" / "pylock.good.toml", base, served,
                 ("1.0", "0.01"), "1.0")
    bad = _lock(tmp_path / "bad" / "pylock.bad.toml", base, served,
                ("1.1", "0.04"), "2.0")
    code = main(["bisect", str(good), str(bad), "--gate", "--repeat", "2",
                 "--python", sys.executable, "--json"])
    report = parse_output(capsys.readouterr().out)
    assert code == 0, report["stopped"]
    assert [(c["name"], c["old"], c["new"]) for c in
            report["culprits"][0]["changes"]] == [
        ("sglang", "1.0", "1.1")]
    steps = report["steps"]
    good_tps, bad_tps = steps[0]["samples"], steps[1]["samples"]
    assert (steps[0]["state"], steps[1]["state"]) == ("good", "bad")
    assert len(good_tps) == len(bad_tps) == 2
    assert min(good_tps) > max(bad_tps)  # tok/s: 10 ms a token against 40 ms
    assert all(len(s["samples"]) >= 2 for s in steps if s["ran"])
    assert report["culprits"][0]["verified"] is True
    # each step's server ran with that step's own caches (its scratch folder,
    # removed when the step ended), never the user's or another step's
    logs = sorted(tmp_path.rglob("gate/*.log"))
    caches = {}
    for log in logs:
        line = next(ln for ln in log.read_text().splitlines() if ln.startswith("env "))
        seen = dict(kv.split("=", 1) for kv in line.split()[1:])
        step = log.parent.parent
        assert seen["TRITON_CACHE_DIR"] == str(step / "tmp" / "triton"), (log, seen)
        assert seen["TMPDIR"] == str(step / "tmp")
        caches[step] = seen["TRITON_CACHE_DIR"]
    assert len(caches) == sum(1 for s in steps if s["ran"]) >= 2
    assert not any(Path(c).exists() for c in caches.values())
