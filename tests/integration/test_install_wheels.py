"""Real uv, real wheels (recorded from PyPI), served from a loopback server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomlkit
from packaging.pylock import Pylock

import stacklock.lock.read
from stacklock.cli import main
from stacklock.errors import HashMismatchError, InstallError
from stacklock.install.render import render_install
from stacklock.install.run import install_lock, rollback_install
from stacklock.lock import Lock, parse_lock
from stacklock.lock.write import render_lock
from stacklock.snapshot import make_snapshot
from stacklock.store import ArtifactStore
from tests.helpers.install_server import (
    DATA,
    SMALL_LOCK,
    Served,
    local_lock,
    sha256,
    tree_state,
)
from tests.helpers.jsonout import parse_output

PY = sys.executable


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # where nothing may be written unasked
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))


def _run_py(venv: Path, code: str) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def _names(lock: Path) -> dict[str, str]:
    data = tomllib.loads(lock.read_text("utf-8"))
    return {p["name"]: p["version"] for p in data["packages"]}


def test_install_imports_and_snapshot_matches(
    server: tuple[str, Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    parsed: list[str] = []

    def counted(content: bytes, *, path: str) -> Lock:
        parsed.append(path)
        return parse_lock(content, path=path)

    monkeypatch.setattr(stacklock.lock.read, "parse_lock", counted)
    result = install_lock(lock, venv=venv, python=PY, cache=tmp_path / "cache")
    # read, preflight, the copy uv installs from and validate share one parse
    assert parsed == [str(lock)]
    assert venv.is_symlink() and venv.resolve() == tmp_path / "env.stacklock" / "1"
    out = _run_py(
        venv, "import six, idna, iniconfig; print(six.__version__, idna.__version__)"
    )
    assert out == "1.17.0 3.20"
    assert {Path(p).name for p in result.logs.values()} >= {
        p.name for p in (tmp_path / "cache" / "logs").iterdir()
    }
    assert "uv-pip-sync" in result.logs and result.logs["uv-pip-sync"].is_file()
    # every wheel came from the loopback server, once
    assert sorted(p for p, _ in served.requests) == sorted(served.files)
    snapshot = make_snapshot(venv)
    snap = Pylock.from_dict(tomllib.loads(render_lock(snapshot)))
    assert {str(p.name): str(p.version) for p in snap.packages} == _names(lock)
    locked = tomllib.loads(lock.read_text("utf-8"))
    want = {p["name"]: p["wheels"][0]["hashes"]["sha256"] for p in locked["packages"]}
    got = {p.name: p.wheels[0].hashes["sha256"] for p in snapshot.packages}
    assert got == want
    assert snapshot.snapshot is not None and snapshot.snapshot.unknown_origin == ()
    assert "generation 1" in render_install(result)
    # install ends with stacklock.validate: the lock's packages are all there
    assert result.validation is not None
    checks = {c.name: c.status for c in result.validation.checks}
    assert checks["distributions"] == "pass" and checks["wheel-hashes"] == "pass"
    # counted by status, each skip with its reason (no GPU, no toolkit here)
    text = render_install(result).splitlines()
    verdict = next(line for line in text if line.startswith("validate: "))
    skipped = [c for c in result.validation.checks if c.status == "skip"]
    assert skipped and verdict.startswith("validate: ok: ")
    assert f"{len(skipped)} skipped" in verdict and "passed" in verdict
    for check in skipped:
        assert f"  skipped {check.name}: {check.reason}" in text
    # its report goes into the venv's state folder, not the working directory
    folder = tmp_path / "env.stacklock" / "validate"
    assert f"  report: {folder}" in text
    assert json.loads((folder / "report.json").read_text())["verdict"] == "pass"
    assert not (tmp_path / "stacklock-validate").exists()


def test_install_report_goes_where_asked(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    report = tmp_path / "asked"
    assert main(["install", str(lock), "--venv", str(tmp_path / "env"), "--python",
                 PY, "--report", str(report)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert f"  report: {report}" in said
    # one line a phase: what was fetched, the commands and skipped checks counted
    assert [line for line in said if line.startswith(" ")] == [f"  report: {report}"]
    assert "commands: 2 (-v shows them)" in said
    assert [line for line in said if line.startswith("fetched: ")] == [
        "fetched: 88.2 kB (uv 3 files, 88.2 kB; stacklock nothing)"]
    assert json.loads((report / "report.json").read_text())["verdict"] == "pass"
    assert (report / "report.md").is_file()
    assert not (tmp_path / "env.stacklock" / "validate").exists()


def test_reinstall_snapshots_old_and_rollback_restores(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY)
    marker = venv / "lib" / "marker-gen1"
    marker.write_text("1")
    second = install_lock(lock, venv=venv, python=PY, reinstall=True)
    assert second.replaced_generation == 1
    assert second.snapshot == tmp_path / "env.stacklock" / "pylock.snapshot-1.toml"
    assert _names(second.snapshot) == _names(lock)
    assert venv.resolve().name == "2" and not (venv / "lib" / "marker-gen1").exists()
    back = rollback_install(venv)
    assert (back.from_generation, back.to_generation) == (2, 1)
    assert (venv / "lib" / "marker-gen1").read_text() == "1"
    with pytest.raises(InstallError, match="no environment before generation 1"):
        rollback_install(venv)
    # installing again replaces generation 1: its snapshot is named after it
    third = install_lock(lock, venv=venv, python=PY, validate=False,
                         reinstall=True)
    assert (third.plan.generation, third.replaced_generation) == (3, 1)
    assert (
        third.snapshot is not None and third.snapshot.name == "pylock.snapshot-1.toml"
    )
    assert rollback_install(venv).to_generation == 1


@pytest.mark.parametrize("prefetch", [True, False], ids=["store", "uv"])
def test_tampered_wheel_aborts_and_old_venv_is_intact(
    server: tuple[str, Served], tmp_path: Path, prefetch: bool
) -> None:
    """Caught by the store's sha256 (default) or by uv's own hash check."""
    base, served = server
    venv = tmp_path / "env"
    good = local_lock(base, served, tmp_path / "good" / "pylock.small.toml")
    # the first install fills another store, so the second must download
    install_lock(good, venv=venv, python=PY, validate=False, cache=tmp_path / "c1")
    before = tree_state(tmp_path / "env.stacklock" / "1") | tree_state(venv)
    bad = local_lock(base, served, tmp_path / "bad" / "pylock.small.toml", tamper="six")
    with pytest.raises(HashMismatchError, match=r"six-1\.17\.0") as info:
        install_lock(bad, venv=venv, python=PY, prefetch=prefetch, reinstall=True)
    # one line naming the wheel and both hashes, from the store or from uv's log
    assert "\n" not in str(info.value)
    six = "six-1.17.0-py2.py3-none-any.whl"
    assert info.value.url.endswith(six)
    assert info.value.expected == sha256(DATA / "wheels" / six)
    assert info.value.actual != info.value.expected
    assert tree_state(tmp_path / "env.stacklock" / "1") | tree_state(venv) == before
    assert not (tmp_path / "env.stacklock" / "2").exists()
    assert _run_py(venv, "import six; print(six.__version__)") == "1.17.0"


_INSTALL_NO_PREFETCH = """
import sys
from pathlib import Path
from stacklock.install.run import install_lock
install_lock(Path(sys.argv[1]), venv=Path(sys.argv[2]), python=sys.executable,
             prefetch=False, validate=False, reinstall=True)
"""


@pytest.mark.parametrize("phase", ["download", "uv"])
def test_killed_install_leaves_old_venv_intact(
    server: tuple[str, Served], tmp_path: Path, phase: str
) -> None:
    """SIGKILL stacklock (and its uv) while a slow server trickles the wheels:
    during stacklock's own download, or while uv downloads (prefetch off)."""
    base, served = server
    venv = tmp_path / "env"
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    install_lock(lock, venv=venv, python=PY, validate=False, cache=tmp_path / "c1")
    before = tree_state(tmp_path / "env.stacklock" / "1") | tree_state(venv)
    slow = local_lock(base, served, tmp_path / "slow" / "pylock.small.toml")
    for path in served.files:
        served.delay[path] = 0.05
    served.requests.clear()
    if phase == "download":
        argv = [PY, "-m", "stacklock.cli", "install", str(slow), "--venv", str(venv),
                "--python", PY, "--no-validate", "--reinstall"]  # fmt: skip
    else:
        argv = [PY, "-c", _INSTALL_NO_PREFETCH, str(slow), str(venv)]
    proc = subprocess.Popen(
        argv, start_new_session=True, env=os.environ.copy(),
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "killed.err").open("w"),
    )  # fmt: skip
    assert served.started.wait(timeout=60), (tmp_path / "killed.err").read_text()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert tree_state(tmp_path / "env.stacklock" / "1") | tree_state(venv) == before
    assert venv.resolve().name == "1"
    # the next run cleans up and succeeds
    served.delay.clear()
    served.requests.clear()
    result = install_lock(slow, venv=venv, python=PY, validate=False,
                          reinstall=True)
    assert venv.resolve().name in {"2", "3"}
    if phase == "uv":
        assert any("removed unfinished generation 2" in n for n in result.notes)
    assert _run_py(venv, "import idna; print(idna.__version__)") == "3.20"


def test_plain_venv_is_adopted_snapshotted_and_restorable(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    uv = str(Path(PY).parent / "uv")
    subprocess.run([uv, "venv", "-q", "--python", PY, str(venv)], check=True)
    wheel = (
        Path(__file__).resolve().parents[1]
        / "data/install/wheels/six-1.17.0-py2.py3-none-any.whl"
    )
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin/python"), str(wheel)],
        check=True,
    )
    result = install_lock(lock, venv=venv, python=PY)
    assert result.replaced_generation == 1 and result.plan.generation == 2
    snap = tomllib.loads(Path(str(result.snapshot)).read_text())
    six = next(p for p in snap["packages"] if p["name"] == "six")
    # uv's direct_url.json names the file but no hash: snapshot hashes the file
    assert six["wheels"][0]["url"] == wheel.as_uri()
    assert six["wheels"][0]["hashes"]["sha256"] == sha256(wheel)
    assert _run_py(venv, "import idna; print(idna.__version__)") == "3.20"
    rollback_install(venv)
    assert _run_py(venv, "import six; print(six.__version__)") == "1.17.0"
    with pytest.raises(subprocess.CalledProcessError):
        _run_py(venv, "import idna")


def test_dry_run_changes_nothing(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "in" / "pylock.small.toml")
    before = tree_state(tmp_path)
    result = install_lock(lock, venv=tmp_path / "env", python=PY, dry_run=True)
    assert tree_state(tmp_path) == before
    assert served.requests == []
    text = render_install(result)
    assert "would install" in text and "uv pip sync" in text.replace(
        "/uv pip", " uv pip"
    )
    assert result.plan.download_bytes == sum(len(b) for b in served.files.values())


def test_wheels_already_in_the_store_are_not_downloaded(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    store = ArtifactStore(tmp_path / "cache" / "artifacts")
    import httpx

    with httpx.Client() as http:
        for path in served.files:
            store.fetch(http, base + path)
    served.requests.clear()
    served.files.clear()  # the server now has nothing: the store must be used
    result = install_lock(lock, venv=tmp_path / "env", python=PY)
    assert all(d.cached for d in result.plan.downloads)
    assert served.requests == []
    assert _run_py(tmp_path / "env", "import six; print(six.__version__)") == "1.17.0"


def test_wheels_by_relative_path_install_offline(tmp_path: Path) -> None:
    """PEP 751 ``path`` wheels are relative to the lock, wherever uv reads it."""
    data = tomllib.loads(SMALL_LOCK.read_text("utf-8"))
    folder = tmp_path / "bundle"
    (folder / "wheels").mkdir(parents=True)
    for pkg in data["packages"]:
        pkg.pop("sdist", None)
        for wheel in pkg["wheels"]:
            name = wheel.pop("url").rsplit("/", 1)[-1]
            shutil.copy(DATA / "wheels" / name, folder / "wheels" / name)
            wheel["path"] = f"wheels/{name}"
    lock = folder / "pylock.toml"
    lock.write_text(tomlkit.dumps(data))
    result = install_lock(lock, venv=tmp_path / "env", python=PY, validate=False)
    urls = [d.url for d in result.plan.downloads]
    assert result.plan.download_bytes == 0  # local files: nothing to download
    assert urls == [f"wheels/{p.name}" for p in sorted((folder / "wheels").iterdir())]
    assert (
        _run_py(tmp_path / "env", "import iniconfig, six; print(six.__version__)")
        == "1.17.0"
    )


def test_failed_first_install_leaves_nothing_behind(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    bad = local_lock(base, served, tmp_path / "bad" / "pylock.small.toml", tamper="six")
    venv = tmp_path / "env"
    with pytest.raises(HashMismatchError, match=r"six-1\.17\.0"):
        install_lock(bad, venv=venv, python=PY)
    assert not os.path.lexists(venv)
    assert not (tmp_path / "env.stacklock").exists()  # no state folder, no lock file


def test_installing_the_live_lock_again_is_a_no_op(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same bytes into a venv whose current generation holds them: nothing
    is built, downloaded or validated; another lock, --reinstall, or a venv that
    no longer holds the lock's packages builds a new generation as before."""
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    served.requests.clear()
    argv = ["install", str(lock), "--venv", str(venv), "--python", PY]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"already installed: {venv} (generation 1) holds ")
    assert "nothing changed" in printed
    assert served.requests == [] and venv.resolve().name == "1"
    assert sorted(p.name for p in (tmp_path / "env.stacklock").iterdir()
                  if p.name.isdigit()) == ["1"]
    assert main([*argv, "--json"]) == 0
    assert parse_output(capsys.readouterr().out)["already_installed"] == 1
    # --reinstall builds generation 2 all the same
    assert main([*argv, "--no-validate", "--reinstall"]) == 0
    assert venv.resolve().name == "2"
    # a venv changed behind stacklock's back (a package removed) is rebuilt
    uv = str(Path(PY).parent / "uv")
    subprocess.run([uv, "pip", "uninstall", "-q", "--python",
                    str(venv / "bin" / "python"), "six"], check=True)
    again = install_lock(lock, venv=venv, python=PY, validate=False)
    assert again.already_installed is None and venv.resolve().name == "3"
    # another lock (one package fewer) is installed, not skipped
    data = tomlkit.parse(lock.read_text("utf-8"))
    data["packages"] = [p for p in data["packages"] if p["name"] != "six"]
    other = tmp_path / "other" / "pylock.small.toml"
    other.parent.mkdir()
    other.write_text(tomlkit.dumps(data), "utf-8")
    assert install_lock(other, venv=venv, python=PY,
                        validate=False).already_installed is None
    assert venv.resolve().name == "4"


def test_what_an_install_fetched_is_what_the_server_sent(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bytes install says uv fetched are the bytes the index sent: all of
    them into the first venv; none into the second from uv's warm cache (the
    files may be cached an hour), where the plan's count of what stacklock's
    store lacked said '88.2 kB not cached' before; all again once the index
    says nothing of caching (uv keeps no copy then)."""
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    said = []
    for venv, cache in (("env", "max-age=3600"), ("env2", "max-age=3600"),
                        ("env3", None)):
        served.headers.pop("Cache-Control", None)
        if cache:
            served.headers["Cache-Control"] = cache
        else:  # uv's copy of an hour is gone: a cold cache again
            shutil.rmtree(tmp_path / "uv-cache")
        served.requests.clear()
        assert main(["install", str(lock), "--venv", str(tmp_path / venv),
                     "--python", PY, "--no-validate", "--json"]) == 0
        fetched = parse_output(capsys.readouterr().out, "install")["fetched"]
        sent = [len(served.files[path]) for path, _ in served.requests]
        assert fetched == {"uv_files": len(sent), "uv_bytes": sum(sent),
                           "stacklock_bytes": 0}
        said.append(len(sent))
    assert said == [3, 0, 3]
    assert main(["install", str(lock), "--venv", str(tmp_path / "env4"),
                 "--python", PY, "--no-validate"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "fetched: 88.2 kB (uv 3 files, 88.2 kB; stacklock nothing)")
    # --prefetch (as bisect installs): stacklock's store fetches, uv reads files
    served.requests.clear()
    result = install_lock(lock, venv=tmp_path / "env5", python=PY, validate=False,
                          prefetch=True, cache=tmp_path / "other-cache")
    sent = [len(served.files[path]) for path, _ in served.requests]
    assert result.fetched is not None and len(sent) == 3
    assert result.fetched.to_dict() == {"uv_files": 0, "uv_bytes": 0,
                                        "stacklock_bytes": sum(sent)}
