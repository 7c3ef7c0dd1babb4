"""Install's head start, with real uv and wheels from the loopback server: uv
building the next generation while install loads, adopted when the plan runs
exactly its commands, stopped and removed otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomlkit

from stacklock.cli import main
from stacklock.install.early import head_start
from stacklock.store import ArtifactStore
from tests.helpers.install_server import DATA, Served, local_lock, sha256
from tests.helpers.jsonout import parse_output

PY = sys.executable


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)


def _install(lock: Path, venv: Path, capsys: pytest.CaptureFixture[str]
             ) -> tuple[int, dict[str, object], str]:
    rc = main(["install", str(lock), "--venv", str(venv), "--python", PY,
               "--no-validate", "--json"])
    out, err = capsys.readouterr()
    return rc, parse_output(out) if rc in (0, 1) else {}, err


def _runs(log: Path) -> list[str]:
    """The commands a step's log shows, one per run."""
    return [line for line in log.read_text("utf-8").splitlines()
            if line.startswith("$ ")]


def test_the_plan_adopts_the_uv_run_it_would_have_started(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    rc, result, _ = _install(lock, venv, capsys)
    assert rc == 0
    plan = result["plan"]
    assert isinstance(plan, dict)
    logs = result["logs"]
    assert isinstance(logs, dict)
    # each uv step ran once, and it ran the planned command
    for step, argv in zip(("uv-venv", "uv-pip-sync"), plan["commands"], strict=True):
        assert _runs(Path(logs[step])) == ["$ " + " ".join(argv)]
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import six, idna; print(six.__version__)"],
                         check=True, capture_output=True, text=True).stdout
    assert out.strip() == "1.17.0"
    state = tmp_path / "env.stacklock"
    assert sorted(p.name for p in state.iterdir()) == [
        "1", "1.ok", "pylock.generation-1.toml"]


def test_a_failed_check_stops_uv_and_leaves_nothing(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    data = tomllib.loads(lock.read_text("utf-8"))
    data["environments"] = ["python_version == '2.7'"]  # preflight's target fails
    lock.write_text(tomlkit.dumps(data), "utf-8")
    venv = tmp_path / "env"
    rc, _, err = _install(lock, venv, capsys)
    assert rc == 2
    assert "target" in err and "Traceback" not in err
    assert not os.path.lexists(venv)
    assert not (tmp_path / "env.stacklock").exists()


def test_a_plan_that_differs_stops_the_head_start_and_runs_its_own(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    # one wheel already in the artifact store: the plan installs it from there,
    # so uv reads a rewritten copy of the lock, not the one the head start read
    store = ArtifactStore(tmp_path / "cache" / "artifacts")
    wheel = next((DATA / "wheels").glob("six-*.whl"))
    copy = tmp_path / wheel.name
    copy.write_bytes(wheel.read_bytes())
    store.adopt(copy, sha256(wheel))
    venv = tmp_path / "env"
    rc, result, _ = _install(lock, venv, capsys)
    assert rc == 0
    plan, logs = result["plan"], result["logs"]
    assert isinstance(plan, dict) and isinstance(logs, dict)
    sync = _runs(Path(logs["uv-pip-sync"]))
    assert sync[-1] == "$ " + " ".join(plan["commands"][1])
    assert len(_runs(Path(logs["uv-venv"]))) == 2  # the stopped one, then the plan's
    copy = (tmp_path / "env.stacklock" / "1" / "lib").glob("python*/site-packages/six*")
    assert any(copy)


def test_no_head_start_for_what_install_must_refuse_or_explain(tmp_path: Path) -> None:
    zipped = tmp_path / "pack.bin"
    zipped.write_bytes(b"payload" + b"PK\x05\x06" + bytes(18))
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\n', "utf-8")
    for path, venv in ((tmp_path / "missing.toml", tmp_path / "env"),
                       (tmp_path, tmp_path / "env"), (zipped, tmp_path / "env"),
                       (lock, tmp_path / "not" / "yet" / "env"), (lock, lock)):
        with head_start(path, venv=venv, python=PY,
                        cache=tmp_path / "cache") as head:
            assert head is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack.bin", "pylock.toml"]


def test_leaving_without_adopting_stops_uv(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    for name in list(served.files):
        served.delay[name] = 0.05  # uv is still downloading when the block ends
    venv = tmp_path / "env"
    with head_start(lock, venv=venv, python=PY, cache=tmp_path / "cache") as head:
        assert head is not None
        assert head.generation == 1
        served.started.wait(30)
    assert not (tmp_path / "env.stacklock").exists()
    assert not os.path.lexists(venv)
    assert "[exit 0]" in head.logs["uv-venv"].read_text("utf-8")
    # stopped by SIGTERM while it downloaded
    assert head.logs["uv-pip-sync"].read_text("utf-8").endswith("[exit -15]\n")


def test_find_uv_is_the_binary_uv_s_own_finder_finds() -> None:
    from uv import find_uv_bin

    from stacklock.uvbin import find_uv

    assert os.path.samefile(find_uv(), find_uv_bin())


def test_a_second_install_of_the_venv_is_refused_before_uv_starts(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stacklock.install.layout import VenvLayout, locked_state

    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    with locked_state(VenvLayout(venv=venv)):  # another install holds it
        rc, _, err = _install(lock, venv, capsys)
        assert rc == 2
        assert "another stacklock install is running" in err
        assert not (tmp_path / "env.stacklock" / "1").exists()
    assert served.requests == []  # uv never started downloading


def test_a_lock_edited_after_the_head_start_is_installed_as_edited(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    from stacklock.install.run import install_lock

    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv, cache = tmp_path / "env", tmp_path / "cache"
    with head_start(lock, venv=venv, python=PY, cache=cache) as head:
        assert head is not None
        edited = lock.read_text("utf-8") + "\n# edited while uv ran\n"
        lock.write_text(edited, "utf-8")
        result = install_lock(lock, venv=venv, python=PY, validate=False,
                              cache=cache, head=head)
    # the copy uv had started from is not the file the plan read: stopped,
    # and the plan's own run installed what the file holds now
    assert len(_runs(result.logs["uv-venv"])) == 2
    state = tmp_path / "env.stacklock"
    assert (state / "pylock.generation-1.toml").read_text("utf-8") == edited
    assert venv.resolve() == state / "1"
