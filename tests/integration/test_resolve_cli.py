"""``stacklock resolve`` end to end: offline from a cache filled by recorded real
traffic, and (``live``) against real PyPI."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from stacklock.cli import main
from stacklock.lock import load_lock
from tests.helpers.jsonout import parse_output
from tests.helpers.resolved import fill_cache
from tests.helpers.uv import uv_dry_run

DATA = Path(__file__).resolve().parents[1] / "data" / "resolve"
ROOT = Path(__file__).resolve().parents[2]


def test_cli_resolves_offline_from_the_cache(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    fill_cache("pypi-small", cache)
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(cache))
    out = tmp_path / "pylock.pypi-small.toml"
    # --no-check: the recorded cache holds pages and METADATA, not wheel bytes
    code = main(["resolve", "pypi-small", "-o", str(out), "--offline", "--json",
                 "--no-check"])
    assert code == 0
    summary = parse_output(capsys.readouterr().out)
    assert summary["lock"] == str(out)
    assert summary["packages"] == len(load_lock(out).packages)
    assert isinstance(summary["seconds"], float)
    assert out.read_text() == (ROOT / "locks" / "pylock.pypi-small.toml").read_text()


def test_cli_conflict_exits_1_and_writes_nothing(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    fill_cache("conflict", cache)
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(cache))
    out = tmp_path / "pylock.conflict.toml"
    code = main(["resolve", str(DATA / "cases" / "conflict.toml"), "-o", str(out),
                 "--offline"])
    err = capsys.readouterr().err
    assert code == 1
    assert "The conflict is caused by" in err and "urllib3" in err
    assert not out.exists()
    # with --json the answer is on stdout too: the error document, exit 1
    code = main(["resolve", str(DATA / "cases" / "conflict.toml"), "-o", str(out),
                 "--offline", "--json"])
    said = capsys.readouterr()
    error = parse_output(said.out, "error")
    assert code == error["exit_code"] == 1
    assert error["error"]["type"] == "ResolutionError"
    assert said.err.startswith(f"stacklock: error: {error['error']['message']}")
    assert not out.exists()


def test_cli_check_json_says_up_to_date_then_what_differs(tmp_path, monkeypatch,
                                                          capsys):
    """``resolve --check --json``: up to date against the lock it just wrote;
    against an edited copy, exit 1 with the diff inside (stacklock.resolve-check)."""
    cache = tmp_path / "cache"
    fill_cache("pypi-small", cache)
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(cache))
    out = tmp_path / "pylock.pypi-small.toml"
    argv = ["resolve", "pypi-small", "-o", str(out), "--offline", "--no-check"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv, "--check", "--json"]) == 0
    same = parse_output(capsys.readouterr().out, "resolve-check")
    assert (same["up_to_date"], same["exists"], same["diff"]) == (True, True, None)
    first = load_lock(out).packages[0]
    sha = first.wheels[0].hashes["sha256"]
    out.write_text(out.read_text().replace(sha, "0" * 64))  # another file's bytes
    assert main([*argv, "--check", "--upgrade", "--json"]) == 1
    stale = parse_output(capsys.readouterr().out, "resolve-check")
    assert stale["up_to_date"] is False
    [changed] = stale["diff"]["packages"]
    assert (changed["name"], changed["change"]) == (first.name, "hash_changed")


def test_cli_bad_index_options_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["resolve", "pypi-small", "--index", "no-equals-sign"]) == 2
    assert "is not NAME=URL" in capsys.readouterr().err
    assert main(["resolve", "pypi-small", "--index", "nope=http://x"]) == 2
    assert "no index named 'nope'" in capsys.readouterr().err


@pytest.mark.live
@pytest.mark.parametrize("profile", ["pypi-small", "pypi-cu130"])
def test_live_pypi_profile_resolves_and_uv_accepts_the_lock(profile, tmp_path):
    out = tmp_path / f"pylock.{profile}.toml"
    from stacklock.resolve.locking import lock_profile

    result = lock_profile(profile, output=out, cache_dir=tmp_path / "cache")
    pylock = Pylock.from_dict(tomllib.loads(out.read_text()))
    assert len(pylock.packages) == len(result.resolution.packages) > 0
    names = {p.name for p in pylock.packages}
    assert {r.name for r in result.resolution.profile.requirements.packages} <= names
    uv_dry_run(out, tmp_path, offline=False)


def test_index_error_in_a_page_worker_reaches_the_user_intact(tmp_path, capsys,
                                                               monkeypatch):
    """--offline with an empty cache: the worker process raises IndexUnreadable, the
    CLI prints it as one line and exits 2 (the error crossed the process)."""
    from stacklock.errors import IndexUnreadable
    from stacklock.resolve.locking import lock_profile

    with pytest.raises(IndexUnreadable) as err:
        lock_profile("pypi-small", output=tmp_path / "x.toml", offline=True,
                     cache_dir=tmp_path / "empty")
    assert err.value.index == "pypi"
    assert "--offline" in str(err.value)
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "empty"))
    assert main(["resolve", "pypi-small", "-o", str(tmp_path / "y.toml"),
                 "--offline"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "y.toml").exists()
