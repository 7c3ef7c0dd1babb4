"""Replaying an unchanged resolution (stacklock.resolve.memo), over recorded real
PyPI traffic (tests/data/resolve/cassettes/)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.http import make_http_client
from stacklock.index.cache import PageCache
from stacklock.resolve import locking
from stacklock.resolve.locking import lock_profile, render_resolve
from stacklock.resolve.memo import memo_key, replay_lock, store_record
from tests.helpers.cassette import ReplayTransport
from tests.helpers.jsonout import parse_output

DATA = Path(__file__).resolve().parents[1] / "data" / "resolve"
ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "profiles" / "pypi-small.toml"


def _resolve(profile: Path, out: Path, cache: Path, cassette: str = "pypi-small"):
    transport = ReplayTransport(DATA / "cassettes" / cassette)
    with make_http_client(transport=transport) as http:
        return lock_profile(str(profile), output=out, http=http, cache_dir=cache,
                            check=False)


def _replay(profile: Path, out: Path, cache: Path, **kwargs):
    return replay_lock(str(profile), output=out, cache_dir=cache, check=False,
                       **kwargs)


def test_an_unchanged_resolution_is_replayed_byte_for_byte(tmp_path):
    out, cache = tmp_path / "pylock.pypi-small.toml", tmp_path / "cache"
    result = _resolve(SMALL, out, cache)
    locked = out.read_bytes()
    out.unlink()
    replay = _replay(SMALL, out, cache)
    assert replay is not None
    assert out.read_bytes() == locked == (ROOT / "locks" /
                                          "pylock.pypi-small.toml").read_bytes()
    assert replay.render().split("\n")[1:] == render_resolve(result).split("\n")[1:]
    assert replay.render().startswith(f"locked {len(result.resolution.packages)} "
                                      "packages for pypi-small in ")
    assert replay.to_dict()["packages"] == result.to_dict()["packages"]


def test_a_stale_or_changed_page_or_a_new_profile_resolves_again(tmp_path):
    out, cache = tmp_path / "pylock.pypi-small.toml", tmp_path / "cache"
    result = _resolve(SMALL, out, cache)
    assert _replay(SMALL, out, cache) is not None
    # stale pages: resolve (and revalidate) again, unless --offline
    later = time.time() + 601
    assert _replay(SMALL, out, cache, clock=lambda: later) is None
    assert _replay(SMALL, out, cache, clock=lambda: later, offline=True) is not None
    assert _replay(SMALL, out, cache, refresh=True) is None
    # another profile (one more byte), another output, the check asked for
    edited = tmp_path / "pypi-small.toml"
    edited.write_bytes(SMALL.read_bytes() + b"\n# edited\n")
    assert _replay(edited, out, cache) is None
    assert _replay(SMALL, tmp_path / "other.toml", cache) is None
    assert replay_lock(str(SMALL), output=out, cache_dir=cache, check=True) is None
    # a page the index now serves differently
    pages = PageCache(cache / "pages")
    url = next(iter(result.resolution.pages_read))
    body, _ctype, meta = pages.read_page(url)
    changed = body.replace(b"}", b" }", 1)
    pages.write_page(url, url, changed, {**meta, "sha256": "0" * 64})
    assert _replay(SMALL, out, cache) is None


def test_a_page_missing_from_its_index_is_not_recorded(tmp_path):
    store_record(tmp_path, "ab" * 32, pages={"https://pypi.org/simple/x/": None},
                 lock_text="", packages=0, lines=[], native=None)
    assert not (tmp_path / "resolutions").exists()


def test_a_local_index_is_never_replayed(tmp_path):
    from stacklock.profile import load_profile

    profile = tmp_path / "local.toml"
    profile.write_text('[[index]]\nname = "here"\nurl = "./wheels"\n'
                       '[requirements]\npackages = ["x"]\n')
    loaded = load_profile(str(profile))
    assert memo_key(loaded, output=tmp_path / "lock.toml", check=True) is None


def test_cli_second_run_is_a_replay_with_the_same_output(tmp_path, monkeypatch,
                                                        capsys):
    out, cache = tmp_path / "pylock.pypi-small.toml", tmp_path / "cache"
    _resolve(SMALL, out, cache)
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(cache))
    assert main(["resolve", str(SMALL), "-o", str(out), "--no-check"]) == 0
    first = capsys.readouterr().out

    def no_resolution(*args, **kwargs):
        raise AssertionError("resolved again")

    monkeypatch.setattr(locking, "lock_profile", no_resolution)
    assert main(["resolve", str(SMALL), "-o", str(out), "--no-check", "--json"]) == 0
    summary = parse_output(capsys.readouterr().out)
    assert summary["lock"] == str(out) and isinstance(summary["seconds"], float)
    assert main(["resolve", str(SMALL), "-o", str(out), "--no-check"]) == 0
    assert capsys.readouterr().out.split("\n")[1:] == first.split("\n")[1:]
    with pytest.raises(AssertionError, match="resolved again"):
        main(["resolve", str(SMALL), "-o", str(out), "--no-check", "--refresh"])


def test_the_committed_lock_resolves_to_itself_and_is_not_rewritten(tmp_path):
    """Starting from the committed lock (its pins preferred), the recorded pages
    give it back byte for byte, and the file is left as it was."""
    out, cache = tmp_path / "pylock.pypi-small.toml", tmp_path / "cache"
    committed = (ROOT / "locks" / "pylock.pypi-small.toml").read_bytes()
    out.write_bytes(committed)
    before = out.stat().st_mtime_ns
    result = _resolve(SMALL, out, cache)
    assert result.text.encode() == committed and not result.written
    assert out.read_bytes() == committed and out.stat().st_mtime_ns == before
