"""uv downloads the locked wheels itself: real uv, real wheels (recorded from PyPI)
on a loopback server. The lock's sha256 is what uv checks every download against;
validate hashes the installed files against the RECORD uv wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomlkit
from uv import find_uv_bin

from stacklock.install.run import install_lock
from stacklock.lock import load_lock
from stacklock.validate.checks import check_wheel_hashes
from stacklock.validate.run import read_distributions
from tests.helpers.install_server import DATA, Served, local_lock, sha256, tree_state
from tests.helpers.jsonout import parse_output

PY = sys.executable
SIX = "six-1.17.0-py2.py3-none-any.whl"
# an index host that marks its files immutable, as PyPI's file host does: uv then
# serves a second install from its cache without asking again
PYPI_FILES_CACHE_CONTROL = "max-age=365000000, immutable, public"


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)


def _wheel_hashes(lock: Path, venv: Path) -> tuple[str, dict[str, list[str]]]:
    dists = read_distributions(venv / "bin/python")
    result = check_wheel_hashes(load_lock(lock), dists)
    return result.status, result.details


def test_uv_fetches_each_wheel_once_and_the_store_keeps_no_copy(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    served.headers["Cache-Control"] = PYPI_FILES_CACHE_CONTROL
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    install_lock(lock, venv=tmp_path / "env", python=PY, validate=False)
    assert sorted(p for p, _ in served.requests) == sorted(served.files)
    # the stack lives once: unpacked in uv's cache, not as wheels in the store
    assert not list((tmp_path / "cache").rglob("*.whl"))
    assert not (tmp_path / "cache" / "artifacts" / "sha256").exists()
    # a second venv from the same lock is built from uv's cache
    served.files.clear()
    served.requests.clear()
    install_lock(lock, venv=tmp_path / "env2", python=PY, validate=False)
    assert served.requests == []
    out = subprocess.run([str(tmp_path / "env2/bin/python"), "-c",
                          "import six; print(six.__version__)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1.17.0"


def test_wrong_sha256_in_the_lock_is_one_line_exit_2_and_changes_nothing(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    good = local_lock(base, served, tmp_path / "good" / "pylock.small.toml")
    venv = tmp_path / "env"
    install_lock(good, venv=venv, python=PY, validate=False)
    before = tree_state(tmp_path / "env.stacklock" / "1") | tree_state(venv)
    data = tomllib.loads(good.read_text("utf-8"))
    wrong = "0" * 64
    for pkg in data["packages"]:
        for wheel in pkg["wheels"]:
            if wheel["url"].endswith(SIX):
                wheel["hashes"] = {"sha256": wrong}
    bad = tmp_path / "bad" / "pylock.small.toml"
    bad.parent.mkdir()
    bad.write_text(tomlkit.dumps(data), "utf-8")
    proc = subprocess.run(
        [PY, "-m", "stacklock.cli", "install", str(bad), "--venv", str(venv),
         "--python", PY, "--allow-no-gpu"],
        capture_output=True, text=True, env=os.environ.copy(), check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert SIX in lines[0] and wrong in lines[0]
    assert sha256(DATA / "wheels" / SIX) in lines[0]
    assert f"{venv} was not changed" in lines[0]
    # nothing half-installed: the old venv as it was, no new generation left
    assert tree_state(tmp_path / "env.stacklock" / "1") | tree_state(venv) == before
    assert venv.resolve().name == "1"
    assert sorted(p.name for p in (tmp_path / "env.stacklock").iterdir()) == [
        "1", "1.ok", "pylock.generation-1.toml"]  # no snapshot: 1 was not replaced


def test_validate_hashes_the_files_uv_installed(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    """No wheel in the artifact store: every installed file is hashed against
    the RECORD uv wrote; a file changed after install fails the check."""
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    status, details = _wheel_hashes(lock, venv)
    assert status == "pass"
    names = sorted(p.name for p in load_lock(lock).packages)
    assert sorted(details["intact"]) == names and details["verified"] == []
    # uv's cache plays no part: gone, the answer is the same
    subprocess.run([find_uv_bin(), "cache", "clean", "-q"], check=True)
    assert _wheel_hashes(lock, venv) == (status, details)
    six = next(venv.glob("lib/python*/site-packages/six.py"))
    six.write_bytes(six.read_bytes() + b"# changed\n")
    status, details = _wheel_hashes(lock, venv)
    assert status == "fail"
    assert details["mismatched"] == ["six: 1 files differ from the RECORD written "
                                     "at install (first: six.py)"]


def test_install_whose_validation_cannot_run_exits_1(
    server: tuple[str, Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real install, then a validation that cannot run (here: the venv cannot list
    its distributions): the install stays, but the answer is "not verified", exit 1,
    never a silent 0 with the checks and the gate gone."""
    import stacklock.validate.run
    from stacklock.cli import main
    from stacklock.errors import ValidateError

    def cannot_run(*_: object, **__: object) -> None:
        raise ValidateError("env/bin/python cannot list its distributions")

    monkeypatch.setattr(stacklock.validate.run, "validate_install", cannot_run)
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    code = main(["install", str(lock), "--venv", str(tmp_path / "env"),
                 "--python", PY, "--json"])
    said = parse_output(capsys.readouterr().out)
    assert code == 1
    assert said["validate_error"] == (
        "validate could not run: env/bin/python cannot list its distributions")
    assert said["validation"] is None
    assert (tmp_path / "env/bin/python").exists()  # the install itself stands
