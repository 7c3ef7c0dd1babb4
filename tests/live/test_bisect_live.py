"""Live: two real locks of a numerical stack a year apart (January 2024 and
January 2025), resolved by stacklock from PyPI, and an oracle that fails on
numpy 2: bisect names numpy, with what must move with it, within
ceil(log2(groups)) + 4 oracle runs (the two ends and the two verifications
included), and every step after the ends installs from the cache."""

from __future__ import annotations

import math
import sys
import tomllib
from pathlib import Path

import pytest

from stacklock.cli import main
from tests.helpers.jsonout import parse_output

pytestmark = pytest.mark.live

PROFILE = """\
[profile]
description = "a CPU numerical stack as of January {year}"
[target]
python = "{python}"
platform = "linux_x86_64"
manylinux = "2_28"
[requirements]
packages = ["numpy", "scipy", "pandas", "matplotlib"]
exclude-newer = "{year}-01-15T00:00:00Z"
"""
FAILS_ON_NUMPY_2 = "import numpy, sys; sys.exit(numpy.__version__.startswith('2.'))"


def _lock(tmp_path: Path, year: int) -> Path:
    profile = tmp_path / f"numerics-{year}.toml"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    profile.write_text(PROFILE.format(year=year, python=python), "utf-8")
    lock = tmp_path / f"pylock.numerics-{year}.toml"
    assert main(["resolve", str(profile), "-o", str(lock)]) == 0
    return lock


def test_bisect_names_numpy_2_between_two_real_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)
    good, bad = _lock(tmp_path, 2024), _lock(tmp_path, 2025)
    capsys.readouterr()
    code = main(["bisect", str(good), str(bad), "--python", sys.executable,
                 "--json", "--", "python", "-c", FAILS_ON_NUMPY_2])
    report = parse_output(capsys.readouterr().out)
    assert code == 0, report["stopped"]
    changes = [c for g in report["groups"] for c in g["changes"]]
    assert len(changes) >= 10
    culprit = report["culprits"][0]
    assert [c["name"] for c in culprit["changes"]] == ["numpy"]
    numpy = culprit["changes"][0]
    assert numpy["old"].startswith("1.") and numpy["new"].startswith("2.")
    # what cannot stay behind with numpy 2 (scipy 1.11 caps numpy < 1.28)
    assert "scipy" in {c["name"] for c in culprit["moved_with_it"]}
    assert culprit["verified"] is True and culprit["confirmed"] is True
    budget = math.ceil(math.log2(len(report["groups"]))) + 4
    assert report["oracle_runs"] <= budget
    # the ends fetch the wheels; every later step installs from the cache
    ran = [s for s in report["steps"] if s["ran"]]
    assert ran[0]["bytes_fetched"] > 0
    assert all(s["bytes_fetched"] == 0 for s in ran[2:])
    first_bad = tomllib.loads(Path(report["first_bad"]).read_text("utf-8"))
    last_good = tomllib.loads(Path(report["last_good"]).read_text("utf-8"))
    versions = {p["name"]: p["version"] for p in first_bad["packages"]}
    assert versions["numpy"] == numpy["new"]
    assert {p["name"]: p["version"] for p in last_good["packages"]}["numpy"] == (
        numpy["old"])
