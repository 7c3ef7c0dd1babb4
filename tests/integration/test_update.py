"""``stacklock update`` as a scheduled job runs it: last week's nightly lock
against today's pages.

The pages are download.pytorch.org's nightly format (tests/helpers/
pytorch_index.py) over the nightly stand-ins of tests/data/mirror/pytorch/
files.toml, served as they were at the recording's cut-off (last week) and as
they are now. The full blackwell-cu130-nightly profile resolves on the loopback
mirror; the validating runs install a nightly-only stack whose stand-ins carry
no requirements (derived here, never stored), so that uv installs every wheel
from loopback and each nightly package moves on its own for bisect.
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

import pytest

from scripts.record_mirror import NIGHTLY_CUTOFF
from stacklock.cli import main
from tests.helpers.jsonout import parse_output
from tests.helpers.loopback import loopback
from tests.helpers.mirror import WheelHost, resolve_on_mirror, serve_mirror
from tests.helpers.nightly import NIGHTLY, Quiet, derive_nightly, newest, oracle
from tests.helpers.uv import python312

PROFILE = "blackwell-cu130-nightly"


def test_update_writes_todays_lock_and_a_summary_naming_every_change(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sgl_derived: str) -> None:
    lock, summary = tmp_path / "pylock.nightly.toml", tmp_path / "update.md"
    host = WheelHost()
    with serve_mirror(sgl_root=sgl_derived, as_of=NIGHTLY_CUTOFF) as mirror:
        urls = mirror.index_urls(nightly=True, sgl_page="sgl")
        code, _, err = resolve_on_mirror(monkeypatch, tmp_path / "last-week",
                                         PROFILE, urls, host, "-o", str(lock))
        assert code == 0, err
        week_ago = lock.read_bytes()
        mirror._server.as_of = None  # a week later: today's pages
        today = tmp_path / "today"
        code, out, err = resolve_on_mirror(
            monkeypatch, today, PROFILE, urls, host, "-o", str(lock),
            "--summary", str(summary), "--json", verb="update")
        assert code == 4, err  # changed (not validated)
        report = parse_output(out, "update")
        written = lock.read_bytes()
        summary.unlink()
        asked = len(mirror.requested)
        code, out, err = resolve_on_mirror(
            monkeypatch, today, PROFILE, urls, host, "-o", str(lock),
            "--summary", str(summary), "--json", verb="update")
        again = parse_output(out, "update")
        # nothing changed: a replay, as a warm resolve --check (no page asked)
        assert len(mirror.requested) == asked
    assert host.refused == []
    assert written != week_ago
    assert report["schema"] == "stacklock.update/1"
    assert (report["state"], report["released"]) == ("changed", "all")
    changes = {c["name"]: (c["change"], c["old"], c["new"])
               for c in report["diff"]["packages"]}
    moved = {p: ("upgraded", newest(p, NIGHTLY_CUTOFF), newest(p))
             for p in NIGHTLY if newest(p, NIGHTLY_CUTOFF) != newest(p)}
    assert moved and changes == moved
    assert report["written"] == [str(lock), str(summary)]
    assert (code, again["state"], again["written"]) == (0, "unchanged", [])
    assert lock.read_bytes() == written and not summary.exists()


def test_summary_names_each_change_and_what_the_check_passed_over(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sgl_derived: str) -> None:
    lock, summary = tmp_path / "pylock.nightly.toml", tmp_path / "update.md"
    host = WheelHost()
    with serve_mirror(sgl_root=sgl_derived, as_of=NIGHTLY_CUTOFF) as mirror:
        urls = mirror.index_urls(nightly=True, sgl_page="sgl")
        code, _, err = resolve_on_mirror(monkeypatch, tmp_path / "a", PROFILE, urls,
                                         host, "-o", str(lock))
        assert code == 0, err
        mirror._server.as_of = None
        code, out, err = resolve_on_mirror(
            monkeypatch, tmp_path / "b", PROFILE, urls, host, "-o", str(lock),
            "--prereleases", "--summary", str(summary), verb="update")
    assert code == 4, err
    text = summary.read_text()
    assert text.startswith(f"# stacklock update {PROFILE}: ")
    assert "(not validated)" in text and "Released: " in text
    for project in NIGHTLY:
        old, new = newest(project, NIGHTLY_CUTOFF), newest(project)
        assert project in text and old in text and new in text, project
        assert re.search(rf"{project} upgraded {re.escape(old)} -> "
                         rf"{re.escape(new)}", out), out
    assert "## Passed over by the native check" in text


# -- validation and bisect, on nightly stand-ins with no requirements --------


def test_validate_then_bisect_names_the_culprit_verified_both_ways(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "served"
    today = {p: newest(p) for p in NIGHTLY}
    culprit = "torchaudio"
    failing = oracle(f"m.version({culprit!r}) == {today[culprit]!r}")
    with loopback(partial(Quiet, directory=str(folder))) as base:
        profile = tmp_path / "nightly.toml"
        profile.write_text(
            '[target]\npython = "3.12"\n\n[[index]]\nname = "pytorch-nightly-cu130"'
            f'\nurl = "{base}/whl/nightly/cu130"\npackages = {list(NIGHTLY)!r}\n\n'
            f"[requirements]\npackages = {list(NIGHTLY)!r}\n"
            f"prereleases = {list(NIGHTLY)!r}\n".replace("'", '"'))
        common = [str(profile), "-o", "pylock.toml", "--validate", "--allow-no-gpu",
                  "--python", python312(tmp_path), "--summary", "update.md",
                  "--json", "--no-check"]
        derive_nightly(folder, base, NIGHTLY_CUTOFF)
        code = main(["update", *common, "--", *failing])
        first = parse_output(capsys.readouterr().out, "update")
        # last week's lock: new, validated, passing
        assert code == 4, json.dumps(first["validation"])[:3000]
        assert first["validation"]["ok"] is True
        derive_nightly(folder, base, "2999-01-01T00:00:00Z")  # today's pages, and
        monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache2"))  # a
        # week later no page in the cache is fresh
        code = main(["update", *common, "--max-steps", "12", "--", *failing])
        report = parse_output(capsys.readouterr().out, "update")
    assert code == 1, report  # changed and failing, culprit named
    assert report["state"] == "failing"
    assert {c["name"] for c in report["diff"]["packages"]} == set(NIGHTLY)
    assert [c["name"] for c in report["culprit"]] == [culprit]
    (found, *_) = report["bisect"]["culprits"]
    assert found["confirmed"] is True  # committed lock with it fails
    assert found["verified"] is True  # new lock without it passes
    validation = report["validation"]
    assert (validation["oracle_exit_code"], validation["verdict"]) == (1, "pass")
    assert validation["committed"]["verdict"] == "pass"  # last week's, recorded
    text = (tmp_path / "update.md").read_text()
    assert f"culprit: {culprit} upgraded" in text
    assert "| committed lock (last recorded) | new lock |" in text
    assert "- new lock without it: passes" in text
    assert "- committed lock with it: fails" in text
