"""A ``kind = "flat"`` index that is a folder on this machine, as the README
promises: the three real PyPI wheels of tests/data/install/wheels/ copied into
a folder, and every verb that reads a locked file's bytes (resolve with the
native check, resolve --check, update, check, install with the real uv,
archive, pack) reads them from the folder, never asking the HTTP client for a
``file://`` URL (each failed with ``UnsupportedProtocol`` before)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.cli import main
from tests.helpers.jsonout import parse_output

WHEELS = Path(__file__).resolve().parents[1] / "data" / "install" / "wheels"
PY = sys.executable


@pytest.fixture
def folder_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("STACKLOCK_ARCHIVE", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(WHEELS, tmp_path / "wheels")
    profile = tmp_path / "folder.toml"
    profile.write_text(
        f'[target]\npython = "{sys.version_info.major}.{sys.version_info.minor}"\n\n'
        f'[[index]]\nname = "folder"\nurl = "{(tmp_path / "wheels").as_uri()}"\n'
        'kind = "flat"\n\n[requirements]\npackages = ["six", "idna", "iniconfig"]\n')
    return profile


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_folder_index_resolves_checks_and_updates_from_its_files(
        folder_profile: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / "pylock.folder.toml"
    code, _, err = _run(capsys, "resolve", str(folder_profile), "-o", str(lock))
    assert code == 0, err  # the native check too: it reads the wheels in place
    text = lock.read_text()
    for wheel in WHEELS.iterdir():
        assert (tmp_path / "wheels" / wheel.name).as_uri() in text
    assert _run(capsys, "resolve", "--check", str(folder_profile),
                "-o", str(lock))[0] == 0
    assert _run(capsys, "check", str(lock))[0] == 0
    code, out, err = _run(capsys, "update", str(folder_profile), "-o", str(lock),
                          "--json")
    assert (code, parse_output(out, "update")["state"]) == (0, "unchanged"), err
    # every lock in locks/ against its profile, the pre-commit hook's default
    (tmp_path / "profiles").mkdir()
    shutil.copy2(folder_profile, tmp_path / "profiles" / "folder.toml")
    assert _run(capsys, "resolve", "folder")[0] == 0  # locks/pylock.folder.toml
    code, out, err = _run(capsys, "resolve", "--check", "--json")
    assert code == 0, err
    (one,) = parse_output(out, "resolve-check-all")["locks"]
    assert (one["profile"], one["up_to_date"]) == ("folder", True)
    # a cold cache reads each METADATA from the folder again
    shutil.rmtree(tmp_path / "cache")
    code, _, err = _run(capsys, "resolve", "--check", str(folder_profile),
                        "-o", str(lock), "--no-check")
    assert code == 0, err


def _versions(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import six, idna, iniconfig; print(six.__version__, idna.__version__)"],
        check=True, capture_output=True, text=True).stdout.strip()


def test_a_folder_lock_installs_archives_and_falls_back_when_a_file_goes(
        folder_profile: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / "pylock.folder.toml"
    assert _run(capsys, "resolve", str(folder_profile), "-o", str(lock),
                "--no-check")[0] == 0
    code, _, err = _run(capsys, "install", str(lock), "--venv", str(tmp_path / "e1"),
                        "--python", PY, "--no-validate")
    assert code == 0, err
    assert _versions(tmp_path / "e1") == "1.17.0 3.20"
    code, _, err = _run(capsys, "archive", str(lock), str(tmp_path / "archive"))
    assert code == 0, err
    shutil.rmtree(tmp_path / "wheels")  # the folder is gone: the archive has them
    shutil.rmtree(tmp_path / "cache")
    # without it, the lost file is named before uv is asked for it
    code, _, err = _run(capsys, "install", str(lock), "--venv", str(tmp_path / "env"),
                        "--python", PY, "--no-validate")
    (line,) = err.splitlines()
    assert code == 2 and not (tmp_path / "env").exists(), err
    assert f"{tmp_path / 'wheels'}/idna-3.20-py3-none-any.whl: no such file" in line
    assert "--archive DIR" in line
    code, out, err = _run(capsys, "install", str(lock), "--venv", str(tmp_path / "env"),
                          "--python", PY, "--no-validate", "--json",
                          "--archive", str(tmp_path / "archive"))
    assert code == 0, err
    (note,) = [n for n in parse_output(out, "install")["notes"]
               if "from the archive" in n]
    assert "3 files" in note and "(no such file)" in note
    assert _versions(tmp_path / "env") == "1.17.0 3.20"


def test_the_profiles_archive_travels_in_the_lock_to_archive_and_install(
        folder_profile: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``[archive] url`` in the profile: recorded in the lock, the default DEST
    of ``stacklock archive LOCK`` and where install reads a file that is gone,
    with no flag and no variable."""
    archive = tmp_path / "team-archive"
    folder_profile.write_text(folder_profile.read_text()
                              + f'\n[archive]\nurl = "{archive}"\n')
    lock = tmp_path / "pylock.folder.toml"
    assert _run(capsys, "resolve", str(folder_profile), "-o", str(lock),
                "--no-check")[0] == 0
    assert f'[tool.stacklock.archive]\nurl = "{archive}"\n' in lock.read_text()
    code, out, err = _run(capsys, "archive", str(lock), "--json")
    assert code == 0, err
    assert parse_output(out, "archive")["archive"] == str(archive)
    shutil.rmtree(tmp_path / "wheels")
    shutil.rmtree(tmp_path / "cache")
    code, out, err = _run(capsys, "install", str(lock), "--venv", str(tmp_path / "env"),
                          "--python", PY, "--no-validate", "--json")
    assert code == 0, err
    assert any(f"3 files from the archive {archive}" in n
               for n in parse_output(out, "install")["notes"])
    assert _versions(tmp_path / "env") == "1.17.0 3.20"


def test_what_others_read_is_readable_by_all(
        folder_profile: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Files written for others (the lock update writes and its summary, an
    archive's files and index pages a web server serves, a validation report,
    the venv's activation script) get the modes any new file gets (0644 under
    the usual umask 022); a temporary file is its owner's alone (0600) until it
    is renamed."""
    lock, summary = tmp_path / "pylock.folder.toml", tmp_path / "update.md"
    code, _, err = _run(capsys, "update", str(folder_profile), "-o", str(lock),
                        "--summary", str(summary))
    assert code == 4, err  # a new lock
    assert summary.read_text().startswith(  # was "0 package changes"
        f"# stacklock update {folder_profile}: a new lock (none to compare with)")
    assert _run(capsys, "archive", str(lock), str(tmp_path / "archive"))[0] == 0
    report, venv = tmp_path / "report", tmp_path / "env"
    code, _, err = _run(capsys, "install", str(lock), "--venv", str(venv),
                        "--python", PY, "--report", str(report), "--allow-no-gpu")
    assert code == 0, err
    written = [lock, summary, venv / "stacklock-activate.sh",
               *(p for p in (tmp_path / "archive").rglob("*") if p.is_file()),
               *(p for p in report.rglob("*") if p.is_file())]
    assert {p.name for p in written} >= {"index.html", "report.json", "report.md"}
    modes = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777)
             for p in written}
    assert set(modes.values()) == {oct(0o666 & ~_umask())}, modes


def _umask() -> int:
    mask = os.umask(0)  # the test's own process, no other thread writing
    os.umask(mask)
    return mask


def test_check_all_names_a_lock_no_profile_matches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The pre-commit hook's ``resolve --check`` (every locks/pylock.NAME.toml
    against profile NAME) names the lock whose NAME no profile has, before
    resolving any (was: "no profile named 'gone'", no lock named)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locks").mkdir()
    shutil.copy2(Path(__file__).resolve().parents[2] / "locks" /
                 "pylock.pypi-small.toml", tmp_path / "locks" / "pylock.gone.toml")
    code, out, err = _run(capsys, "resolve", "--check")
    (line,) = err.splitlines()
    assert (code, out) == (2, "")
    assert line.startswith("stacklock: error: locks/pylock.gone.toml: no profile "
                           "named 'gone'")
    assert "-o locks/pylock.gone.toml" in line


def test_update_releases_the_packages_its_patterns_match(
        folder_profile: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``update --package`` takes names and patterns matched against the lock's
    names; a pattern matching none is a typo, refused (was: nothing released,
    "up to date")."""
    lock = tmp_path / "pylock.folder.toml"
    assert _run(capsys, "resolve", str(folder_profile), "-o", str(lock))[0] == 0
    code, out, err = _run(capsys, "update", str(folder_profile), "-o", str(lock),
                          "--package", "I*", "--package", "six", "--json")
    assert code == 0, err
    found = parse_output(out, "update")
    assert (found["state"], found["released"]) == (
        "unchanged", ["idna", "iniconfig", "six"])
    for pattern in ("torch-*", "torch"):
        code, out, err = _run(capsys, "update", str(folder_profile), "-o", str(lock),
                              "--package", pattern)
        (line,) = err.splitlines()
        assert (code, out) == (2, "")
        assert line.startswith(f"stacklock: error: --package {pattern}: matches no "
                               "package of the lock")


@pytest.mark.parametrize("option", [
    ["--step-timeout", "nan"], ["--step-timeout", "inf"], ["--max-steps", "0"],
    ["--repeat", "-1"]])
def test_step_options_that_bound_nothing_are_refused(
        folder_profile: Path, tmp_path: Path, option: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """bisect's and update's step limits: nan and inf passed '<= 0' before."""
    lock = tmp_path / "pylock.folder.toml"
    assert _run(capsys, "resolve", str(folder_profile), "-o", str(lock),
                "--no-check")[0] == 0
    for argv in (["update", str(folder_profile), "-o", str(lock), *option],
                 ["bisect", str(lock), str(lock), *option, "--", "true"]):
        code, out, err = _run(capsys, *argv)
        assert (code, out) == (2, ""), err
        assert err.startswith("stacklock: error: --max-steps, --step-timeout and "
                              "--repeat take a number >= 1"), err
