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
    locked_state,
    recover,
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
    other = VenvLayout(venv=tmp_path / "other")
    other.venv.symlink_to(tmp_path)
    _generation(other, 1)
    with pytest.raises(InstallError, match="symlink stacklock did not make"):
        swap_in(other, 1)


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
