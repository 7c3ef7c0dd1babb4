"""A snapshot and driver check made by stacklock on a real H200 machine.

Expectations come from an independent record of the same machine
(tests/data/real/device/h200-environment-probe.txt: nvidia-smi and `pip list`),
not from stacklock's own output.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.pylock import Pylock
from packaging.utils import canonicalize_name

from stacklock.diff import diff_lock_files

DATA = Path(__file__).resolve().parents[1] / "data"
SNAPSHOT = DATA / "h200" / "pylock.h200-snapshot.toml"
PROBE = DATA / "real" / "device" / "h200-environment-probe.txt"
LOCK = Path(__file__).resolve().parents[2] / "locks" / "pylock.pypi-cu130.toml"


def _probe_pip_list() -> dict[str, str]:
    rows = re.findall(r"^([A-Za-z0-9_.\-]+) {2,}(\d[^\s]*)$", PROBE.read_text(), re.M)
    return {canonicalize_name(name): version for name, version in rows}


def _probe_driver() -> str:
    match = re.search(r"Driver Version: (\S+)", PROBE.read_text())
    assert match
    return match.group(1)


def test_snapshot_is_a_valid_pep751_lock_of_what_the_machine_has() -> None:
    data = tomllib.loads(SNAPSHOT.read_text())
    Pylock.from_dict(data)
    installed = {p["name"]: p["version"] for p in data["packages"]}
    probe = _probe_pip_list()
    assert len(probe) > 30
    for name, version in probe.items():
        assert installed[name] == version, name
    assert data["tool"]["stacklock"]["snapshot"] is True
    assert data["tool"]["stacklock"]["driver"] == _probe_driver()


def test_diff_of_the_cuda13_lock_against_the_real_machine() -> None:
    result = diff_lock_files(LOCK, SNAPSHOT)
    changes = {p.name: p for p in result.packages}
    lock = {p["name"]: p["version"]
            for p in tomllib.loads(LOCK.read_text())["packages"]}
    probe = _probe_pip_list()
    torch = changes["torch"]
    assert (torch.old, torch.new) == (lock["torch"], probe["torch"])
    assert torch.change in {"upgraded", "downgraded"}
    # a package both sides hold at the same version is not listed
    same = [n for n in probe if lock.get(n) == probe[n]]
    assert same and not any(n in changes for n in same)


def test_driver_check_on_the_real_machine_read_the_real_driver() -> None:
    for name in ("check-driver-pypi-cu130.txt", "check-driver-blackwell-cu128.txt"):
        text = (DATA / "h200" / name).read_text()
        first = text.splitlines()[0]
        assert first == f"driver {_probe_driver()} (from /sys/module/nvidia/version)"
        assert "verdict: the driver runs all of it" in text
