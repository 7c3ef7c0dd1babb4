"""Install under faults that a real machine meets: a disk that fills while the new
generation is built, and a generation left incomplete. The old environment must
keep working, the half-built one must go, and the error must name the cause."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

from stacklock.errors import InstallError
from stacklock.install.run import install_lock
from tests.helpers.install_server import Served, local_lock

PY = sys.executable

_FULL_DISK = r"""
set -u
mount -t tmpfs -o size=48m tmpfs "$DISK"
"$PY" -m stacklock.cli install "$LOCK1" --venv "$DISK/env" --python "$PY" \
    --no-validate > "$OUT/first.out" 2> "$OUT/first.err"
echo $? > "$OUT/first.rc"
dd if=/dev/zero of="$DISK/fill" bs=1M 2>/dev/null
"$PY" -m stacklock.cli install "$LOCK2" --venv "$DISK/env" --python "$PY" \
    --no-validate > "$OUT/second.out" 2> "$OUT/second.err"
echo $? > "$OUT/second.rc"
readlink "$DISK/env" > "$OUT/link"
"$DISK/env/bin/python" -c "import six, idna; print('imports')" > "$OUT/imports" 2>&1
ls "$DISK/env.stacklock" > "$OUT/state"
"""


def _without(lock: Path, name: str, dest: Path) -> Path:
    data = tomlkit.parse(lock.read_text())
    packages = data["packages"]
    for i, pkg in enumerate(packages):  # type: ignore[arg-type]
        if pkg["name"] == name:
            del packages[i]  # type: ignore[union-attr]
            break
    dest.write_text(tomlkit.dumps(data))
    return dest


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare(1) for a tmpfs of its own")
def test_a_disk_that_fills_keeps_the_old_environment(
        server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    first = local_lock(base, served, tmp_path / "pylock.small.toml")
    # the second lock: the same wheels plus one more, so a new generation is built
    second = _without(first, "iniconfig", tmp_path / "pylock.second.toml")
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    env = {**os.environ, "DISK": str(disk), "OUT": str(out), "PY": PY,
           "LOCK1": str(first), "LOCK2": str(second),
           "STACKLOCK_CACHE_DIR": str(tmp_path / "cache"),
           "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    subprocess.run(["unshare", "-m", "bash", "-c", _FULL_DISK], env=env,
                   timeout=300, check=True)
    read = {p.name: p.read_text() for p in out.iterdir()}
    assert read["first.rc"].strip() == "0", read["first.err"]
    assert read["second.rc"].strip() == "1", (read["second.out"], read["second.err"])
    lines = read["second.err"].strip().splitlines()
    assert len(lines) == 1 and "no space left on the file system" in lines[0], lines
    assert "Traceback" not in read["second.err"]
    assert read["link"].strip().endswith("/1")  # the old generation stays current
    assert read["imports"].strip() == "imports"
    assert "2" not in read["state"].split()  # the half-built generation is gone


def _lose_six(generation: Path) -> None:
    for path in generation.glob("lib/python*/site-packages/six-*"):
        shutil.rmtree(path)


def _lose_six_s_record(generation: Path) -> None:
    (record,) = generation.glob("lib/python*/site-packages/six-*.dist-info/RECORD")
    record.unlink()  # its METADATA stays: half-written, as good as absent


def _lose_the_interpreter(generation: Path) -> None:
    (generation / "bin" / "python").unlink()  # pyvenv.cfg stays


def test_an_incomplete_generation_is_never_swapped_in(
        server: tuple[str, Served], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """uv says it succeeded, but the new generation lacks a package, a package's
    RECORD or its interpreter (a disk that filled between its writes, a bug):
    the check before the swap refuses it and the old environment stays."""
    base, served = server
    venv = tmp_path / "env"
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    install_lock(lock, venv=venv, python=PY, validate=False, cache=tmp_path / "c")
    from stacklock.install import run as run_module

    real = run_module.build_generation
    again = _without(lock, "iniconfig", tmp_path / "pylock.again.toml")
    six = r"incomplete: 1 locked package missing: six 1\.17\.0 \(absent\)"
    for damage, says in ((_lose_six, six), (_lose_six_s_record, six),
                         (_lose_the_interpreter, r"not a virtual environment")):
        def build_then_damage(plan, *args, damage=damage, **kwargs):  # type: ignore[no-untyped-def]
            real(plan, *args, **kwargs)
            damage(plan.generation_dir)

        monkeypatch.setattr(run_module, "build_generation", build_then_damage)
        with pytest.raises(InstallError, match=says):
            install_lock(again, venv=venv, python=PY, validate=False,
                         cache=tmp_path / "c")
        assert venv.resolve().name == "1", damage
        assert not (tmp_path / "env.stacklock" / "2").exists()
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", "import six"],
                          check=False)
    assert proc.returncode == 0


@pytest.mark.parametrize(("code", "exit_code", "says"), [
    (errno.ENOSPC, 1, "No space left on device (try: free space there"),
    (errno.EFBIG, 1, "File too large (try: a file system that takes larger files, "
                     "or point STACKLOCK_CACHE_DIR"),
    (errno.EROFS, 2, "Read-only file system (try: check the path's permissions"),
    (errno.EACCES, 2, "Permission denied (try: check the path's permissions"),
])
def test_what_the_machine_refuses_is_one_line(
        code: int, exit_code: int, says: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A full, read-only or forbidden cache or target, met anywhere in a verb:
    one line naming the file and the cause, never a traceback."""
    from stacklock import cli

    def verb(args: object) -> int:
        raise OSError(code, os.strerror(code), "/cache/pages/x.page")

    monkeypatch.setattr(cli, "_verb", lambda path: verb)
    assert cli.main(["profiles"]) == exit_code
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"stacklock: error: /cache/pages/x.page: {says}")


def test_a_full_temporary_folder_says_tmpdir(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """The native check keeps a large library's tables in the temporary folder:
    full, the line names it and says to point TMPDIR elsewhere."""
    import tempfile

    from stacklock import cli

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def verb(args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path))

    monkeypatch.setattr(cli, "_verb", lambda path: verb)
    assert cli.main(["profiles"]) == 1
    assert capsys.readouterr().err == (
        f"stacklock: error: {tmp_path}: No space left on device (try: free space "
        "there, or point TMPDIR elsewhere)\n")


def test_old_generations_are_pruned_and_rollback_still_works(
        server: tuple[str, Served], tmp_path: Path) -> None:
    """Five installs of alternating locks: only the newest three generations stay
    on disk, and --rollback goes back to the one the current one replaced."""
    from stacklock.install.layout import KEEP_GENERATIONS
    from stacklock.install.run import rollback_install

    base, served = server
    venv = tmp_path / "env"
    full = local_lock(base, served, tmp_path / "pylock.small.toml")
    short = _without(full, "iniconfig", tmp_path / "pylock.short.toml")
    for i in range(5):
        install_lock(short if i % 2 else full, venv=venv, python=PY,
                     validate=False, cache=tmp_path / "c")
    state = tmp_path / "env.stacklock"
    kept = sorted(int(p.name) for p in state.iterdir() if p.name.isdigit())
    assert kept == [3, 4, 5] and KEEP_GENERATIONS == 3
    assert not list(state.glob("pylock.snapshot-[12].toml"))
    result = rollback_install(venv)
    assert (result.from_generation, result.to_generation) == (5, 4)
    assert venv.resolve().name == "4"


def test_pruning_keeps_what_rollback_goes_back_to_even_when_it_is_old(
        server: tuple[str, Served], tmp_path: Path) -> None:
    """Generations 1, 2, 3, then rolled back twice to 1: the next install (4)
    replaces 1, which is older than the newest three (2, 3, 4). Pruning keeps
    it, so --rollback from 4 restores the environment 4 replaced."""
    from stacklock.install.run import rollback_install

    base, served = server
    venv = tmp_path / "env"
    full = local_lock(base, served, tmp_path / "pylock.small.toml")
    locks = [full, _without(full, "iniconfig", tmp_path / "pylock.a.toml"),
             _without(full, "six", tmp_path / "pylock.b.toml"),
             _without(full, "idna", tmp_path / "pylock.c.toml")]
    for lock in locks[:3]:
        install_lock(lock, venv=venv, python=PY, validate=False, cache=tmp_path / "c")
    assert [rollback_install(venv).to_generation for _ in range(2)] == [2, 1]
    result = install_lock(locks[3], venv=venv, python=PY, validate=False,
                          cache=tmp_path / "c")
    assert (result.plan.generation, result.replaced_generation) == (4, 1)
    state = tmp_path / "env.stacklock"
    assert sorted(int(p.name) for p in state.iterdir() if p.name.isdigit()) == \
        [1, 2, 3, 4]
    back = rollback_install(venv)
    assert (back.from_generation, back.to_generation) == (4, 1)
    imported = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import iniconfig, six, idna"], check=False)
    assert imported.returncode == 0  # generation 1: the full lock


def _with_index(lock: Path, name: str, url: str) -> Path:
    """``lock`` naming ``url`` as its index ``name`` in [tool.stacklock]."""
    data = tomlkit.parse(lock.read_text())
    tool = tomlkit.table()
    stack = tomlkit.table()
    stack["lock-version"] = 1
    stack["profile"] = "private"
    stack["indexes"] = [{"name": name, "url": url}]
    tool["stacklock"] = stack
    data["tool"] = tool
    lock.write_text(tomlkit.dumps(data))
    return lock


@pytest.mark.parametrize("how", ["cli", "library"])
def test_a_private_index_lock_installs_with_the_environments_credentials(
        server: tuple[str, Served], tmp_path: Path, how: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock holds no credentials; STACKLOCK_INDEX_<NAME>_* give them to uv
    (which reads netrc) as they gave them to resolve, and no file keeps them."""
    import base64

    base, served = server
    lock = _with_index(local_lock(base, served, tmp_path / "pylock.small.toml"),
                       "corp", f"{base}/simple")
    served.authorization = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    monkeypatch.setenv("STACKLOCK_INDEX_CORP_USERNAME", "alice")
    monkeypatch.setenv("STACKLOCK_INDEX_CORP_PASSWORD", "s3cret")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    venv = tmp_path / "env"
    if how == "cli":
        proc = subprocess.run(
            [PY, "-m", "stacklock.cli", "install", str(lock), "--venv", str(venv),
             "--python", PY, "--no-validate"], capture_output=True, text=True,
            env={**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "c")},
            timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
    else:
        install_lock(lock, venv=venv, python=PY, validate=False,
                     cache=tmp_path / "c")
    # uv asks without credentials first (401), then with netrc's: each wheel
    # was served only to a request that carried them
    assert {p for p, _ in served.requests} == set(served.files)
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import six, idna"],
                          check=False)
    assert done.returncode == 0
    leftovers = [p for p in tmp_path.rglob("netrc") if p.is_file()]
    assert leftovers == []


def test_the_netrc_uv_reads_is_for_its_owner_alone_while_uv_runs(
        server: tuple[str, Served], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The credentials go to uv in a netrc of the install's work folder: while
    uv downloads (slowly, from a private index), that file holds them and no
    one but its owner may read it, whatever the umask (022 here)."""
    import base64
    import stat

    base, served = server
    lock = _with_index(local_lock(base, served, tmp_path / "pylock.small.toml"),
                       "corp", f"{base}/simple")
    served.authorization = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    for name in served.files:
        served.delay[name] = 0.05
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "c"),
           "STACKLOCK_INDEX_CORP_USERNAME": "alice",
           "STACKLOCK_INDEX_CORP_PASSWORD": "s3cret",
           "NETRC": str(tmp_path / "no-netrc"), "UV_CACHE_DIR": str(tmp_path / "uv")}
    with subprocess.Popen(
            [PY, "-m", "stacklock.cli", "install", str(lock), "--venv",
             str(tmp_path / "env"), "--python", PY, "--no-validate"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=lambda: os.umask(0o022)) as proc:
        assert served.started.wait(60), "uv never started downloading"
        [netrc] = (tmp_path / "env.stacklock").glob("work-*/netrc")
        mode = stat.S_IMODE(netrc.stat().st_mode)
        text = netrc.read_text()
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert mode == 0o600, oct(mode)
    assert "machine 127.0.0.1 login alice password s3cret" in text
    assert not netrc.exists()  # it went with the work folder


def test_without_the_credentials_the_install_fails_and_changes_nothing(
        server: tuple[str, Served], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    base, served = server
    lock = _with_index(local_lock(base, served, tmp_path / "pylock.small.toml"),
                       "corp", f"{base}/simple")
    served.authorization = "Basic c29tZW9uZTplbHNl"
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    with pytest.raises(InstallError):
        install_lock(lock, venv=tmp_path / "env", python=PY, validate=False,
                     cache=tmp_path / "c")
    assert served.unauthorized
    assert not (tmp_path / "env").exists()


def test_the_check_names_five_missing_packages_and_counts_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generation that is a venv holding none of the packages: five are named,
    more are counted ("and 1 more")."""
    from dataclasses import replace

    from stacklock.install.verify import check_generation
    from tests.helpers.data import DATA

    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    plan = install_lock(DATA / "install" / "pylock.small.toml", venv=tmp_path / "env",
                        python=PY, dry_run=True, allow_no_gpu=True).plan
    (plan.generation_dir / "bin").mkdir(parents=True)
    (plan.generation_dir / "pyvenv.cfg").write_text(f"home = {Path(PY).parent}\n")
    (plan.generation_dir / "bin" / "python").symlink_to(PY)
    five = ", ".join(f"p{n} 1.0 (absent)" for n in range(5))
    for count, says in ((5, f"5 locked packages missing: {five};"),
                        (6, f"6 locked packages missing: {five} and 1 more;")):
        wanted = tuple((f"p{n}", "1.0") for n in range(count))
        with pytest.raises(InstallError) as refused:
            check_generation(replace(plan, packages=wanted))
        assert says in str(refused.value)
