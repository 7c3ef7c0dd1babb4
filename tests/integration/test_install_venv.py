"""The generation layout on a real filesystem: swap, journaled adopt, recovery,
the per-venv lock and rollback through the CLI."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.errors import InstallError
from stacklock.install.layout import (
    VenvLayout,
    current_generation,
    holds_lock,
    locked_state,
    prune,
    recover,
    rollback,
    swap_in,
)
from stacklock.install.run import install_lock
from tests.helpers.install_server import SMALL_LOCK
from tests.helpers.jsonout import parse_output


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))


def _generation(layout: VenvLayout, n: int, *, complete: bool = True) -> Path:
    path = layout.generation_dir(n)
    (path / "bin").mkdir(parents=True)
    (path / "marker").write_text(str(n))
    if complete:
        (layout.state_dir / f"{n}.ok").write_text("{}")
    return path


def test_interrupted_adopt_is_undone(tmp_path: Path) -> None:
    """Killed between moving a plain venv away and linking the new one."""
    layout = VenvLayout(venv=tmp_path / "env")
    (layout.venv / "bin").mkdir(parents=True)
    (layout.venv / "marker").write_text("plain")
    _generation(layout, 2)
    layout.journal.write_text(json.dumps({"moved_to": str(layout.generation_dir(1))}))
    os.rename(layout.venv, layout.generation_dir(1))  # ... and the process died
    done = recover(layout)
    assert done[0].startswith("restored")
    assert (
        not layout.venv.is_symlink() and (layout.venv / "marker").read_text() == "plain"
    )
    assert not layout.journal.exists()


def test_recover_removes_unfinished_generations_only(tmp_path: Path) -> None:
    layout = VenvLayout(venv=tmp_path / "env")
    _generation(layout, 1)
    _generation(layout, 2, complete=False)
    (layout.state_dir / "work-2").mkdir()
    swap_in(layout, 1)
    assert recover(layout) == ["removed unfinished generation 2"]
    assert sorted(p.name for p in layout.state_dir.iterdir()) == ["1", "1.ok"]
    assert current_generation(layout) == 1


def test_swap_in_adopts_a_plain_venv_and_refuses_a_foreign_symlink(
    tmp_path: Path,
) -> None:
    layout = VenvLayout(venv=tmp_path / "env")
    (layout.venv / "bin").mkdir(parents=True)
    _generation(layout, 2)
    assert swap_in(layout, 2) == 1
    assert os.readlink(layout.venv) == "env.stacklock/2"
    assert (layout.state_dir / "1.ok").is_file()
    assert not layout.journal.exists()  # the adoption finished: no journal left
    # links stacklock did not make: elsewhere, to a folder named like a
    # generation elsewhere, to a folder of the state folder that is none
    (tmp_path / "elsewhere" / "1").mkdir(parents=True)
    for name, target in (("other", tmp_path), ("digits", tmp_path / "elsewhere" / "1"),
                         ("named", Path("named.stacklock") / "x")):
        other = VenvLayout(venv=tmp_path / name)
        other.venv.symlink_to(target)
        _generation(other, 1)
        assert current_generation(other) is None
        with pytest.raises(InstallError, match="symlink stacklock did not make"):
            swap_in(other, 1)


def test_a_journal_left_after_a_finished_adoption_changes_nothing(
        tmp_path: Path) -> None:
    """The link was made, then the run died before removing the journal: the
    next run removes it and moves nothing."""
    layout = VenvLayout(venv=tmp_path / "env")
    (layout.venv / "bin").mkdir(parents=True)
    _generation(layout, 2)
    swap_in(layout, 2)
    layout.journal.write_text(json.dumps({"moved_to": str(layout.generation_dir(1))}))
    assert recover(layout) == []
    assert os.readlink(layout.venv) == "env.stacklock/2"
    assert layout.generation_dir(1).is_dir() and not layout.journal.exists()


def test_only_a_complete_generation_of_these_very_bytes_holds_a_lock(
        tmp_path: Path) -> None:
    layout = VenvLayout(venv=tmp_path / "env")
    _generation(layout, 1, complete=False)
    copy = layout.state_dir / "pylock.generation-1.toml"
    copy.write_bytes(b"lock bytes")
    swap_in(layout, 1)
    assert holds_lock(layout, b"lock bytes") is None  # not complete
    (layout.state_dir / "1.ok").write_text("{}")
    assert holds_lock(layout, b"lock bytes") == 1
    assert holds_lock(layout, b"other bytes") is None


def test_one_install_per_venv_at_a_time(tmp_path: Path) -> None:
    layout = VenvLayout(venv=tmp_path / "env")
    with locked_state(layout):
        with pytest.raises(InstallError, match="another stacklock install"):
            install_lock(
                SMALL_LOCK, venv=layout.venv, python=sys.executable, validate=False
            )
    assert not os.path.lexists(layout.venv)


def test_cli_rollback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = VenvLayout(venv=tmp_path / "env")
    for n in (1, 2, 3):
        _generation(layout, n)
    (layout.state_dir / "2.ok").unlink()  # 2 never completed: skipped
    swap_in(layout, 3)
    assert main(["install", "--rollback", "--venv", str(layout.venv), "--json"]) == 0
    assert parse_output(capsys.readouterr().out)["to_generation"] == 1
    assert (layout.venv / "marker").read_text() == "1"
    assert main(["install", "--rollback", "--venv", str(layout.venv)]) == 2
    assert "no environment before generation 1" in capsys.readouterr().err


@pytest.mark.parametrize("plain", [True, False], ids=["plain-dir", "nothing"])
def test_refused_rollback_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plain: bool
) -> None:
    venv = tmp_path / "env"
    if plain:
        (venv / "bin").mkdir(parents=True)
    assert main(["install", "--rollback", "--venv", str(venv)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not managed by stacklock install" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["env"] if plain else [])


def test_the_state_lock_is_the_folder_itself(tmp_path: Path) -> None:
    layout = VenvLayout(venv=tmp_path / "env")
    _generation(layout, 1)
    with locked_state(layout):
        with pytest.raises(InstallError, match="another stacklock install"), \
                locked_state(layout):
            pass
    assert sorted(p.name for p in layout.state_dir.iterdir()) == ["1", "1.ok"]


def test_rollback_skips_a_replaced_generation_that_is_gone(tmp_path: Path) -> None:
    """3 records that it replaced 2, but 2 never completed (its .ok is gone):
    rollback goes to the newest complete one before 3."""
    layout = VenvLayout(venv=tmp_path / "env")
    for n in (1, 2, 3):
        _generation(layout, n)
    (layout.state_dir / "3.ok").write_text(json.dumps({"replaces": 2}))
    (layout.state_dir / "2.ok").unlink()
    swap_in(layout, 3)
    assert rollback(layout) == (3, 1)


def test_prune_without_snapshots_removes_and_says_what(tmp_path: Path) -> None:
    """Four complete generations, none with a snapshot file (adopted or made
    before snapshots): the oldest goes, and prune says which."""
    layout = VenvLayout(venv=tmp_path / "env")
    for n in (1, 2, 3, 4):
        _generation(layout, n)
    (layout.state_dir / "4.ok").write_text(json.dumps({"replaces": 3}))
    swap_in(layout, 4)
    assert prune(layout) == [1]
    assert not layout.generation_dir(1).exists()
    assert prune(VenvLayout(venv=tmp_path / "none")) == []
