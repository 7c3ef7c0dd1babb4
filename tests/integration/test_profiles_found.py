"""Profiles by name: the built-in ones travel inside the package (an installed
wheel, as ``pipx install .`` makes, has no checkout beside it), and a
``profiles/NAME.toml`` in the working directory wins over a built-in one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.helpers.data import ROOT
from tests.helpers.jsonout import parse_output


def _installed_copy(site: Path) -> Path:
    """The package as the wheel lays it out: ``stacklock/`` with the checkout's
    ``profiles/`` inside it (pyproject's force-include)."""
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"][
        "build"]["targets"]["wheel"]
    assert wheel["force-include"] == {"profiles": "stacklock/profiles"}
    shutil.copytree(ROOT / "stacklock", site / "stacklock",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "profiles", site / "stacklock" / "profiles")
    return site


def _profiles(cwd: Path, site: Path) -> list[dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-m", "stacklock.cli", "profiles",
                             "--json"], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=60, check=True)
    return parse_output(result.stdout, "profiles")["profiles"]  # type: ignore[no-any-return]


def test_an_installed_package_finds_its_profiles_from_an_empty_directory(
        tmp_path: Path) -> None:
    site = _installed_copy(tmp_path / "site")
    empty = tmp_path / "empty"
    empty.mkdir()
    rows = _profiles(empty, site)
    shipped = sorted(p.stem for p in (ROOT / "profiles").glob("*.toml"))
    assert [r["name"] for r in rows] == shipped
    assert {r["origin"] for r in rows} == {"built-in"}
    assert all(Path(r["path"]).is_relative_to(site / "stacklock" / "profiles")
               for r in rows)


def test_a_local_profile_wins_over_the_built_in_one(tmp_path: Path) -> None:
    site = _installed_copy(tmp_path / "site")
    work = tmp_path / "work"
    (work / "profiles").mkdir(parents=True)
    own = (ROOT / "profiles" / "pypi-small.toml").read_text().replace(
        'description = "', 'description = "ours: ', 1)
    (work / "profiles" / "pypi-small.toml").write_text(own)
    (work / "profiles" / "mine.toml").write_text(
        '[profile]\ndescription = "a local one"\n[target]\npython = "3.12"\n'
        '[requirements]\npackages = ["six"]\n')
    rows = {r["name"]: r for r in _profiles(work, site)}
    assert rows["pypi-small"]["origin"] == "local"
    assert rows["pypi-small"]["description"].startswith("ours: ")
    assert rows["mine"]["origin"] == "local"
    assert rows["pypi-cu130"]["origin"] == "built-in"
