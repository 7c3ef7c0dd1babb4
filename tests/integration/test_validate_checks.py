"""Checks against real venvs made by uv, with wheels the tests build."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stacklock.lock import Lock, load_lock
from stacklock.validate.checks import (
    check_distributions,
    check_uv_pip_check,
    check_wheel_hashes,
    parse_uv_pip_check,
)
from stacklock.validate.run import read_distributions
from tests.helpers.wheelkit import (
    UV,
    build_wheel,
    make_venv,
    store_wheel,
    uv_install,
    write_lock,
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(folder))
    return folder


def _pair(folder: Path) -> tuple[Path, Path]:
    app = build_wheel(folder, "app", "1.0", {"app/__init__.py": b"VALUE = 1\n"},
                      requires=("helper==1.0",))
    helper = build_wheel(folder, "helper", "2.0",
                         {"helper/__init__.py": b"NAME = 'helper'\n"})
    return app, helper


def _tinypkg_installed(tmp_path: Path) -> tuple[Path, Lock, dict]:
    """A wheel built here, installed by uv into a fresh venv: the wheel, its
    lock, and what the venv's python reports installed."""
    wheel = build_wheel(tmp_path / "w", "tinypkg", "0.3.1",
                        {"tinypkg/__init__.py": b"X = 3\n", "tinypkg/data.txt": b"d"})
    python = make_venv(tmp_path / "venv")
    uv_install(python, wheel)
    lock = load_lock(write_lock(tmp_path / "pylock.toml", [wheel]))
    return wheel, lock, read_distributions(python)


def test_installed_venv_matches_its_lock(tmp_path: Path, cache: Path) -> None:
    wheel, lock, dists = _tinypkg_installed(tmp_path)
    result = check_distributions(lock, dists)
    assert result.status == "pass", result.reason
    assert result.details["installed"] == 1
    # not in the artifact cache: the files against the RECORD uv wrote
    intact = check_wheel_hashes(lock, dists)
    assert intact.status == "pass", intact.reason
    assert intact.details["intact"] == ["tinypkg"] and intact.details["verified"] == []
    assert intact.reason == "1 match the RECORD written at install"
    store_wheel(cache, wheel)
    hashes = check_wheel_hashes(lock, dists)
    assert hashes.status == "pass", hashes.reason
    assert hashes.details["verified"] == ["tinypkg"] and hashes.details["intact"] == []


def test_a_file_changed_after_install_is_caught(tmp_path: Path, cache: Path) -> None:
    """With the locked wheel in the artifact cache and without it, the file's
    bytes are what is checked, not the RECORD's text."""
    wheel, lock, dists = _tinypkg_installed(tmp_path)
    dist_info = Path(dists["distributions"][0]["dist_info"])
    (dist_info.parent / "tinypkg" / "data.txt").write_bytes(b"e")
    plain = check_wheel_hashes(lock, dists)
    assert plain.status == "fail"
    assert plain.reason == ("tinypkg: 1 files differ from the RECORD written at "
                            "install (first: tinypkg/data.txt)")
    store_wheel(cache, wheel)
    traced = check_wheel_hashes(lock, dists)
    assert traced.status == "fail"
    assert traced.details["mismatched"] == [
        f"tinypkg: 1 files differ from {wheel.name} (first: tinypkg/data.txt)"]
    (dist_info.parent / "tinypkg" / "__init__.py").unlink()
    assert "2 files differ" in check_wheel_hashes(lock, dists).reason


def test_without_a_record_nothing_is_checked(tmp_path: Path, cache: Path) -> None:
    _, lock, dists = _tinypkg_installed(tmp_path)
    (Path(dists["distributions"][0]["dist_info"]) / "RECORD").unlink()
    result = check_wheel_hashes(lock, dists)
    assert result.status == "skip"
    assert result.details["no_record"] == ["tinypkg"]
    assert result.notes == ("1 cannot be checked (no RECORD, or the sdist is not in "
                            "the artifact cache): tinypkg",)


def test_another_build_of_the_same_version_is_caught(tmp_path: Path,
                                                     cache: Path) -> None:
    locked = build_wheel(tmp_path / "a", "tinypkg", "0.3.1",
                         {"tinypkg/__init__.py": b"X = 3\n"})
    other = build_wheel(tmp_path / "b", "tinypkg", "0.3.1",
                        {"tinypkg/__init__.py": b"X = 4  # rebuilt\n"})
    store_wheel(cache, locked)
    python = make_venv(tmp_path / "venv")
    uv_install(python, other)
    lock = load_lock(write_lock(tmp_path / "pylock.toml", [locked]))
    dists = read_distributions(python)
    assert check_distributions(lock, dists).status == "pass"  # names and versions agree
    result = check_wheel_hashes(lock, dists)
    assert result.status == "fail"
    assert "tinypkg: 1 files differ" in result.reason
    assert "tinypkg/__init__.py" in result.reason


def test_missing_wrong_and_extra(tmp_path: Path, cache: Path) -> None:
    app, helper = _pair(tmp_path / "w")
    helper_old = build_wheel(tmp_path / "old", "helper", "1.0",
                             {"helper/__init__.py": b"NAME = 'old'\n"})
    stray = build_wheel(tmp_path / "w", "stray", "0.1", {"stray.py": b""})
    python = make_venv(tmp_path / "venv")
    uv_install(python, helper, stray)
    lock = load_lock(write_lock(tmp_path / "pylock.toml", [app, helper_old]))
    result = check_distributions(lock, read_distributions(python))
    assert result.status == "fail"
    assert result.details["missing"] == ["app"]
    assert result.details["wrong_version"] == ["helper 2.0 (locked 1.0)"]
    assert result.details["not_locked"] == ["stray"]
    assert result.reason == ("1 missing (app); 1 at another version (helper 2.0 "
                             "(locked 1.0)); 1 not in the lock (stray)")


def test_uv_pip_check_conflict_explained_by_override(tmp_path: Path) -> None:
    app, helper = _pair(tmp_path / "w")
    python = make_venv(tmp_path / "venv")
    uv_install(python, app, helper)
    raw = subprocess.run([UV, "pip", "check", "--python", str(python)],
                         capture_output=True, text=True, check=False)
    conflicts, other = parse_uv_pip_check(raw.stdout + raw.stderr)
    assert conflicts == [{"package": "app", "requirement": "helper==1.0",
                          "installed": "2.0"}]
    assert other == []
    plain = load_lock(write_lock(tmp_path / "plain.toml", [app, helper]))
    failed = check_uv_pip_check(plain, python)
    assert failed.status == "fail"
    assert failed.reason == "1 unexplained: app requires helper==1.0, 2.0 installed"
    lock = load_lock(write_lock(tmp_path / "over.toml", [app, helper],
                                     overrides=("helper>=2",)))
    passed = check_uv_pip_check(lock, python)
    assert passed.status == "pass"
    assert passed.notes == ("app asks for helper==1.0, helper 2.0 is installed as "
                            "the lock's override helper>=2 intends",)
    wrong = load_lock(write_lock(tmp_path / "wrong.toml", [app, helper],
                                      overrides=("helper>=3",)))
    assert check_uv_pip_check(wrong, python).status == "fail"


def test_uv_pip_check_missing_dependency(tmp_path: Path) -> None:
    app, _ = _pair(tmp_path / "w")
    python = make_venv(tmp_path / "venv")
    uv_install(python, app)
    result = check_uv_pip_check(None, python)
    assert result.status == "fail"
    assert "app requires helper==1.0, nothing installed" in result.reason


@pytest.mark.live
def test_live_pypi_venv_against_uv_lock(tmp_path: Path) -> None:
    """uv's own pylock.toml from real PyPI, installed with uv sync, checks clean."""
    (tmp_path / "req.in").write_text("six==1.17.0\nidna==3.10\n")
    lock_path = tmp_path / "pylock.toml"
    subprocess.run([UV, "pip", "compile", "-q", str(tmp_path / "req.in"), "-o",
                    str(lock_path)], check=True, capture_output=True)
    python = make_venv(tmp_path / "venv")
    subprocess.run([UV, "pip", "sync", "-q", "--python", str(python), str(lock_path)],
                   check=True, capture_output=True)
    lock = load_lock(lock_path)
    dists = read_distributions(python)
    result = check_distributions(lock, dists)
    assert result.status == "pass", result.reason
    assert {d["installer"] for d in dists["distributions"]} == {"uv"}
    assert check_uv_pip_check(lock, python).reason == "no conflicts"
