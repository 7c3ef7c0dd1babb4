"""Driver and toolkit facts, parsed from the real H200 probe output, and the rule
that decides whether a driver runs a toolkit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stacklock.cli import main
from stacklock.cuda.catalog import load_catalog
from stacklock.cuda.driver import (
    DRIVER_ENV,
    DriverInfo,
    check_driver,
    check_toolkit_driver,
    lock_cuda,
    parse_nvcc_version,
    parse_nvidia_smi,
    parse_nvidia_smi_csv,
    parse_proc_driver_version,
    parse_version_json,
    read_driver,
)
from stacklock.errors import CudaError, LockError
from stacklock.lock import load_lock
from stacklock.runner import RecordingRunner
from tests.helpers.jsonout import parse_output

if TYPE_CHECKING:
    pass

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
PROBE = (REAL / "device" / "h200-environment-probe.txt").read_text()
PROBE_LINES = PROBE.splitlines()


def _line(prefix: str) -> str:
    return next(ln for ln in PROBE_LINES if ln.startswith(prefix))


def _after(prefix: str, count: int) -> str:
    at = next(i for i, ln in enumerate(PROBE_LINES) if ln.startswith(prefix))
    return "\n".join(PROBE_LINES[at:at + count]) + "\n"


def test_nvidia_smi_table_of_the_h200():
    assert parse_nvidia_smi(PROBE) == ("580.159.04", "13.0")


def test_nvidia_smi_csv_with_header_and_noheader():
    assert parse_nvidia_smi_csv(_after("index, name, driver_version", 2)) == (
        "580.159.04")
    noheader = _line("NVIDIA H200, 580.159.04")
    assert parse_nvidia_smi_csv(
        noheader, fields=("name", "driver_version", "compute_cap")) == "580.159.04"
    with pytest.raises(CudaError, match="columns"):
        parse_nvidia_smi_csv(noheader)  # queried only driver_version: wrong shape


def test_nvidia_smi_csv_refuses_two_drivers():
    with pytest.raises(CudaError, match="one driver"):
        parse_nvidia_smi_csv("580.159.04\n590.48.01\n")


def test_proc_driver_version_of_the_h200():
    assert parse_proc_driver_version(_line("NVRM version:")) == "580.159.04"
    with pytest.raises(CudaError, match="/proc/driver/nvidia/version"):
        parse_proc_driver_version(_line("GCC version:"))


def test_nvcc_version_of_the_h200():
    nvcc = parse_nvcc_version(_after("nvcc: NVIDIA", 5))
    assert (nvcc.release, nvcc.version) == ("13.0", "13.0.88")
    # the same nvcc the catalog knows from NVIDIA's 13.0.1 manifest
    assert load_catalog().get("13.0.1").nvcc_version == nvcc.version


def test_version_json_constructed_from_the_real_13_0_1_manifest():
    # Constructed: no toolkit's version.json was recorded (the probe shows "No such
    # file"); this one has NVIDIA's documented shape and the real component versions
    # of redistrib_13.0.1.json.
    manifest = json.loads((REAL / "redistrib_13.0.1.json").read_text())
    doc = {"cuda": {"name": "CUDA SDK", "version": manifest["release_label"]}}
    doc.update({k: {"name": v["name"], "version": v["version"]}
                for k, v in manifest.items() if isinstance(v, dict)})
    parsed = parse_version_json(json.dumps(doc, indent=3))
    assert parsed.release == "13.0.1"
    assert parsed.components["cuda_nvcc"] == "13.0.88"
    assert parsed.components["nvidia_driver"] == "580.82.07"


def test_version_json_with_a_date_stamp_gives_major_minor():
    # public version.json files of 12.6 write "12.6.20241114" as the cuda version
    parsed = parse_version_json('{"cuda": {"name": "CUDA SDK", '
                                '"version": "12.6.20241114"}}')
    assert (parsed.release, parsed.raw) == ("12.6", "12.6.20241114")
    with pytest.raises(CudaError, match="no 'cuda' version"):
        parse_version_json("{}")


def smi(output: str | None, rc: int = 0) -> RecordingRunner:
    """nvidia-smi answering ``output``; None: not installed."""
    answer = (127, "") if output is None else (rc, output)
    return RecordingRunner(outputs={"nvidia-smi": answer})


def test_read_driver_order(tmp_path: Path):
    runner = smi("580.159.04\n")
    info = read_driver(env={}, root=tmp_path, runner=runner)
    assert info == DriverInfo(version="580.159.04", source="nvidia-smi")
    assert [c.argv for c in runner.calls] == [
        ("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")]

    proc = tmp_path / "proc/driver/nvidia/version"
    proc.parent.mkdir(parents=True)
    proc.write_text(_line("NVRM version:") + "\n" + _line("GCC version:") + "\n")
    runner = smi(None)
    info = read_driver(env={}, root=tmp_path, runner=runner)
    assert info.source == "/proc/driver/nvidia/version" and not runner.calls

    sys_file = tmp_path / "sys/module/nvidia/version"
    sys_file.parent.mkdir(parents=True)
    sys_file.write_text("580.159.04\n")
    assert read_driver(env={}, root=tmp_path, runner=runner).source == (
        "/sys/module/nvidia/version")

    info = read_driver(env={DRIVER_ENV: "590.48.01"}, root=tmp_path, runner=runner)
    assert info == DriverInfo(version="590.48.01", source=DRIVER_ENV)


def test_no_driver_anywhere_is_one_clear_error(tmp_path: Path):
    with pytest.raises(CudaError) as info:
        read_driver(env={}, root=tmp_path, runner=smi(None))
    assert "nvidia-smi" in info.value.message
    assert info.value.hint is not None and DRIVER_ENV in info.value.hint


def test_failing_nvidia_smi_is_reported(tmp_path: Path):
    with pytest.raises(CudaError, match=r"nvidia-smi \(exit 9\)"):
        read_driver(env={}, root=tmp_path, runner=smi("", rc=9))


def test_bad_env_override_is_rejected():
    with pytest.raises(CudaError, match=DRIVER_ENV):
        read_driver(env={DRIVER_ENV: "latest"})


def test_h200_driver_passes_13_0_and_fails_13_1():
    catalog = load_catalog()
    for version in ("13.0.0", "13.0.1", "13.0.2", "13.0.3"):
        check = check_toolkit_driver("580.159.04", catalog.get(version))
        assert check.ok, check.reason
    # 13.0.3 has no Table 3 row: it passes on the bundled 580.126.20
    assert "bundles" in check_toolkit_driver("580.159.04",
                                             catalog.get("13.0.3")).reason
    for version in ("13.1.0", "13.1.1"):
        check = check_toolkit_driver("580.159.04", catalog.get(version))
        assert not check.ok and check.verdict == "compat-only"
        assert "minor-version compatibility only" in check.reason
    # no Table 3 row and older than the bundled 590.48.01: not proven to work
    check = check_toolkit_driver("580.159.04", catalog.get("13.1.2"))
    assert check.verdict == "unverified" and not check.ok


def test_driver_below_the_floor_is_too_old():
    check = check_toolkit_driver("575.57.08", load_catalog().get("13.0.1"))
    assert check.verdict == "too-old" and "580.0" in check.reason
    assert check_toolkit_driver("575.57.08", load_catalog().get("12.9.1")).ok


def test_check_driver_against_wheels_uses_the_ga_release():
    h200 = DriverInfo(version="580.159.04", source="test")
    report = check_driver(load_catalog(), h200, toolkit="13.0.1",
                          wheels={"torch": "13.0", "sgl-kernel": "13"})
    assert report.ok
    assert [c.cuda for c in report.checks] == ["13.0.1", "13.0.0", "13.0.0"]
    report = check_driver(load_catalog(), h200, wheels={"torch": "13.1"})
    assert not report.ok and report.checks[0].cuda == "13.1.0"
    with pytest.raises(CudaError, match="nothing to check"):
        check_driver(load_catalog(), h200)


REAL_LOCK = (Path(__file__).resolve().parents[2]
             / "locks" / "pylock.blackwell-cu128.toml")


def _lock_labels(text: str) -> dict[str, str]:
    """name -> [packages.tool.stacklock] cuda, read with tomllib (independently)."""
    import tomllib

    return {p["name"]: p["tool"]["stacklock"]["cuda"]
            for p in tomllib.loads(text)["packages"]
            if "cuda" in p.get("tool", {}).get("stacklock", {})}


def test_check_driver_cli_with_a_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]):
    """The committed CUDA 12.8 lock; then a copy whose torch says CUDA 13.1."""
    text = REAL_LOCK.read_text()
    labels = _lock_labels(text)
    assert labels["torch"] == "12.8"
    assert lock_cuda(load_lock(REAL_LOCK)) == ("12.8.1", labels)
    monkeypatch.setenv(DRIVER_ENV, "580.159.04")
    assert main(["cuda", "check-driver", "--lock", str(REAL_LOCK)]) == 0
    out = capsys.readouterr().out
    assert "toolkit 12.8.1: pass" in out and "torch (CUDA 12.8): pass" in out
    assert main(["cuda", "check-driver", "13.1", "--json"]) == 1
    data = parse_output(capsys.readouterr().out)
    assert data["ok"] is False and data["checks"][0]["verdict"] == "compat-only"
    edited = tmp_path / "pylock.edited.toml"
    edited.write_text(text.replace('cuda = "12.8"', 'cuda = "13.1"', 1))
    assert _lock_labels(edited.read_text())["torch"] == "13.1"
    assert main(["cuda", "check-driver", "--lock", str(edited)]) == 1


def test_bad_lock_is_a_lock_error(tmp_path: Path):
    bad = tmp_path / "pylock.bad.toml"
    bad.write_text("[[packages]\n")
    with pytest.raises(LockError, match="not valid TOML"):
        load_lock(bad)
    with pytest.raises(LockError, match="no such lock file"):
        load_lock(tmp_path / "missing.toml")
    bad.write_text(REAL_LOCK.read_text().replace('cuda = "12.8"', 'cuda = "cu128"', 1))
    with pytest.raises(LockError, match=r"packages\[\d+\]\.tool\.stacklock\.cuda: "
                       "'cu128' is not a CUDA version"):
        lock_cuda(load_lock(bad))
