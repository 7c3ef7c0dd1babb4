"""The hostile-input corpus, round two, on the paths into install: a FIFO as the
lock, an oracle that leaves processes behind, and what a foreign lock may claim.
Real processes, real uv, wheels built here and served on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.hostile import hostile_env, refused, run_cli
from tests.helpers.install_server import Served
from tests.helpers.wheelkit import build_wheel, sha256

# -- 6. a FIFO given as the lock, on every path into install ------------------------


@pytest.mark.parametrize("extra", [[], ["--python", sys.executable], ["--dry-run"],
                                   ["--python", sys.executable, "--dry-run"]],
                         ids=["head-start", "python", "dry-run", "python-dry-run"])
def test_a_fifo_lock_is_refused_on_every_path_into_install(
        tmp_path: Path, extra: list[str]) -> None:
    fifo = tmp_path / "pylock.toml"
    os.mkfifo(fifo)
    try:
        result = run_cli("install", str(fifo), "--venv", str(tmp_path / "venv"),
                         *extra, env=hostile_env(tmp_path), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("install waited on the FIFO")
    refused(result, str(fifo), "not a regular file (a FIFO)")
    assert not (tmp_path / "venv").exists()


# -- 4. the oracle's processes end with its step ------------------------------------


def _lock(path: Path, base: str, served: Served, version: str) -> Path:
    wheel = build_wheel(path.parent / "wheels", "alpha", version,
                        {"alpha.py": f"VERSION = {version!r}\n".encode()})
    served.files[f"/files/{wheel.name}"] = wheel.read_bytes()
    path.write_text(textwrap.dedent(f"""\
        lock-version = "1.0"
        created-by = "tests"
        requires-python = ">=3.11"
        [[packages]]
        name = "alpha"
        version = "{version}"
        [[packages.wheels]]
        url = "{base}/files/{wheel.name}"
        hashes = {{sha256 = "{sha256(wheel)}"}}
        """))
    return path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_nothing_the_oracle_started_outlives_its_step(
        server: tuple[str, Served], tmp_path: Path) -> None:
    """Each run of the oracle leaves a ``sleep 300 &``, a server in the
    background and a ``setsid`` process behind, writes into its TMPDIR and the
    JIT caches a GPU stack fills (Triton's, torch extensions', Inductor's, the
    CUDA driver's: under HOME by default), notes any file an earlier step left
    there, then exits (0 on alpha 1.0, 1 on 2.0). After the bisect none of the
    processes runs, no step's scratch folder is left, and no step saw what
    another compiled (the caches under HOME were shared before)."""
    base, served = server
    good = _lock(tmp_path / "good" / "pylock.toml", base, served, "1.0")
    bad = _lock(tmp_path / "bad" / "pylock.toml", base, served, "2.0")
    pids, scratch, seen = tmp_path / "pids", tmp_path / "scratch", tmp_path / "seen"
    oracle = textwrap.dedent(f"""\
        sleep 300 &
        echo $! >> {pids}
        python -m http.server 0 --bind 127.0.0.1 >/dev/null 2>&1 &
        echo $! >> {pids}
        setsid sh -c 'echo $$ >> {pids}; exec sleep 300' &
        echo "$TMPDIR" >> {scratch}
        echo left > "${{TMPDIR:-/tmp}}/oracle-was-here"
        for d in "${{TRITON_CACHE_DIR:-$HOME/.triton/cache}}" \\
                 "${{TORCH_EXTENSIONS_DIR:-$HOME/.cache/torch_extensions}}" \\
                 "${{TORCHINDUCTOR_CACHE_DIR:-$HOME/torchinductor}}" \\
                 "${{CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}}"; do
          if ls "$d" 2>/dev/null | grep -q kernel-; then echo "$d" >> {seen}; fi
          mkdir -p "$d" && echo compiled > "$d/kernel-$$"
        done
        sleep 0.2
        exec python -c "import alpha, sys; sys.exit(alpha.VERSION == '2.0')"
        """)
    try:
        result = run_cli("bisect", str(good), str(bad), "--python", sys.executable,
                         "--dir", str(tmp_path / "bisect"), "--", "sh", "-c", oracle,
                         env=hostile_env(tmp_path, HOME=str(tmp_path / "home")),
                         cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "alpha" in result.stdout
        started = [int(p) for p in pids.read_text().split()]
        assert len(started) >= 6  # GOOD and BAD at least, three each
        assert [p for p in started if _alive(p)] == []
        folders = scratch.read_text().split()
        assert folders and all(f.startswith(str(tmp_path / "bisect")) for f in folders)
        assert not any(Path(f).exists() for f in folders)
        assert not seen.exists(), seen.read_text()
        assert not (tmp_path / "home").exists()
    finally:  # on a failure, leave no process behind either
        for pid in (int(p) for p in pids.read_text().split()) if pids.exists() \
                else ():
            if _alive(pid):
                os.kill(pid, 9)


# -- 5. and 7. what a foreign lock may claim ----------------------------------------


def _six(lock: Path, **fields: object) -> None:
    """Change six's wheel table (the third package) in ``lock``."""
    import tomllib

    import tomlkit

    data = tomllib.loads(lock.read_text())
    data["packages"][2]["wheels"][0].update(fields)
    lock.write_text(tomlkit.dumps(data))


def _package(lock: Path, index: int, table: dict[str, object]) -> None:
    import tomllib

    import tomlkit

    data = tomllib.loads(lock.read_text())
    data["packages"][index] = table
    lock.write_text(tomlkit.dumps(data))


def _top(lock: Path, **fields: object) -> None:
    import tomllib

    import tomlkit

    data = tomllib.loads(lock.read_text())
    data.update(fields)
    lock.write_text(tomlkit.dumps(data))


def _dry_run(lock: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("install", str(lock), "--venv", str(tmp_path / "venv"), "--python",
                   sys.executable, "--dry-run", env=hostile_env(tmp_path))


@pytest.fixture
def small_lock(server: tuple[str, Served], tmp_path: Path) -> tuple[Path, str]:
    from tests.helpers.install_server import local_lock

    base, served = server
    return local_lock(base, served, tmp_path / "pylock.toml"), base


def test_a_vcs_other_than_git_is_refused(small_lock: tuple[Path, str],
                                         tmp_path: Path) -> None:
    lock, _ = small_lock
    _package(lock, 2, {"name": "six", "version": "1.17.0", "vcs": {
        "type": "hg", "url": "https://hg.example.org/six", "commit-id": "a" * 40}})
    refused(_dry_run(lock, tmp_path), str(lock), "packages[2].vcs.type: 'hg'",
            "git repositories only")


@pytest.mark.parametrize(("size", "shown"), [(-5, "-5"),
                                             (2**63 - 1, "9223372036854775807")])
def test_a_size_no_file_has_is_refused(small_lock: tuple[Path, str], tmp_path: Path,
                                       size: int, shown: str) -> None:
    lock, _ = small_lock
    _six(lock, size=size)
    refused(_dry_run(lock, tmp_path), str(lock),
            f"packages[2].wheels[0].size: {shown} is not the size of a file")


def test_a_long_requires_python_is_shortened_in_the_message(
        small_lock: tuple[Path, str], tmp_path: Path) -> None:
    lock, _ = small_lock
    clauses = ",".join(["<3.0", *(f"!=2.{i}" for i in range(20_000))])
    _top(lock, **{"requires-python": clauses})
    result = _dry_run(lock, tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr) < 1000, len(result.stderr)
    assert "characters)" in result.stderr and str(lock) in result.stderr


def test_ten_thousand_environments_are_shortened_in_the_message(
        small_lock: tuple[Path, str], tmp_path: Path) -> None:
    lock, _ = small_lock
    _top(lock, environments=[f"python_version == '2.{i}'" for i in range(10_000)])
    result = _dry_run(lock, tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr) < 1000, len(result.stderr)
    assert "10,000 environments" in result.stderr


@pytest.mark.parametrize(("url", "expect"), [
    ("{base_auth}/files/six-1.17.0-py2.py3-none-any.whl", "carries credentials"),
    ("files/six-1.17.0-py2.py3-none-any.whl", "is not an absolute URL"),
    ("ftp://127.0.0.1/six-1.17.0-py2.py3-none-any.whl", "is not an absolute URL"),
], ids=["credentials", "relative", "ftp"])
def test_a_wheel_url_a_lock_should_not_hold_is_refused(
        small_lock: tuple[Path, str], tmp_path: Path, url: str, expect: str) -> None:
    lock, base = small_lock
    url = url.replace("{base_auth}", base.replace("http://", "http://u:s3cret@"))
    _six(lock, url=url)
    line = refused(_dry_run(lock, tmp_path), str(lock), "packages[2].wheels[0].url",
                   expect)
    assert "s3cret" not in line


def test_a_file_url_installs_only_the_locked_bytes(
        small_lock: tuple[Path, str], tmp_path: Path) -> None:
    """A ``file://`` wheel (what a lock of a folder index holds) installs, and
    only with the locked sha256: uv checks it as any other."""
    from tests.helpers.install_server import DATA

    lock, _ = small_lock
    wheel = tmp_path / "six-1.17.0-py2.py3-none-any.whl"
    wheel.write_bytes((DATA / "wheels" / wheel.name).read_bytes())
    _six(lock, url=wheel.as_uri())
    venv = tmp_path / "venv"
    args = ("install", str(lock), "--venv", str(venv), "--python", sys.executable,
            "--no-validate")
    assert run_cli(*args, env=hostile_env(tmp_path)).returncode == 0
    data = bytearray(wheel.read_bytes())
    data[10] ^= 1
    wheel.write_bytes(bytes(data))
    result = run_cli(*args, "--reinstall", env=hostile_env(tmp_path))
    refused(result, "sha256 mismatch")


# -- 7. a git URL that git would read as an option ----------------------------------


def test_a_repository_url_starting_with_a_dash_never_reaches_git(
        tmp_path: Path) -> None:
    calls = tmp_path / "git-calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = bin_dir / "git"  # the real git, its command lines recorded
    git.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {calls}\n"
                   f"exec {_real('git')} \"$@\"\n")
    git.chmod(0o755)
    profile = tmp_path / "p.toml"
    profile.write_text(textwrap.dedent(f"""\
        [profile]
        description = "a repository URL that is a git option"
        [target]
        python = "3.12"
        [requirements]
        packages = ["alpha @ git+-uxyz:/repo@{'a' * 40}"]
        """))
    env = hostile_env(tmp_path, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    refused(run_cli("resolve", str(profile), "-o", str(tmp_path / "out.toml"),
                  "--no-check", env=env), "starts with '-'")
    made = calls.read_text().splitlines() if calls.exists() else []
    assert not [c for c in made if " -u" in f" {c}"], made


def _real(program: str) -> str:
    import shutil

    found = shutil.which(program)
    assert found, program
    return found


# -- untried: the user's uv configuration changes nothing install installs ----------


@pytest.mark.parametrize("setting", [
    "UV_INDEX_URL", "PIP_INDEX_URL", "UV_CONSTRAINT", "UV_CONFIG_FILE",
    "user-uv.toml", "broken-uv.toml"])
def test_the_users_uv_configuration_changes_nothing_installed(
        small_lock: tuple[Path, str], tmp_path: Path, setting: str) -> None:
    """Each setting, were uv to follow it, would change or stop what installs
    (an index that does not answer, six pinned to another version, sdists
    only, a file that is not TOML); the lock's three wheels install all the
    same. Without --python: uv's python discovery runs too."""
    lock, _ = small_lock
    cwd, home = tmp_path / "work", tmp_path / "home"
    (home / ".config" / "uv").mkdir(parents=True)
    cwd.mkdir()
    pins = tmp_path / "constraints.txt"
    pins.write_text("six==1.16.0\n")
    config = ('[pip]\nindex-url = "http://127.0.0.1:9/simple"\nno-binary = [":all:"]\n'
              'constraint-dependencies = ["six==1.16.0"]\n')
    more = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    if setting in ("UV_INDEX_URL", "PIP_INDEX_URL"):
        more[setting] = "http://127.0.0.1:9/simple"
    elif setting == "UV_CONSTRAINT":
        more[setting] = str(pins)
    elif setting == "UV_CONFIG_FILE":
        (tmp_path / "uv.toml").write_text(config)
        more[setting] = str(tmp_path / "uv.toml")
    elif setting == "user-uv.toml":
        (home / ".config" / "uv" / "uv.toml").write_text(config)
    else:
        (cwd / "uv.toml").write_text("this is [ not TOML\n")
    venv = tmp_path / "venv"
    result = run_cli("install", str(lock), "--venv", str(venv), "--no-validate",
                     env=hostile_env(tmp_path, **more), cwd=cwd)
    assert result.returncode == 0, result.stderr[-2000:]
    code = ("import importlib.metadata as m; print(sorted((d.metadata['Name'], "
            "d.version) for d in m.distributions()))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == str([("idna", "3.20"), ("iniconfig", "2.3.1"),
                               ("six", "1.17.0")])


# -- 7. a venv where stacklock removes things ---------------------------------------


def test_a_venv_inside_the_cache_or_another_venvs_generations_is_refused(
        small_lock: tuple[Path, str], tmp_path: Path) -> None:
    lock, _ = small_lock
    env = hostile_env(tmp_path)
    first = tmp_path / "first"
    assert run_cli("install", str(lock), "--venv", str(first), "--python",
                   sys.executable, "--no-validate", env=env).returncode == 0
    assert first.is_symlink()  # first -> first.stacklock/1
    places = {tmp_path / "cache" / "artifacts" / "venv": "inside stacklock's cache",
              first / "nested": "where stacklock keeps the generations",
              tmp_path / "first.stacklock" / "venv": "where stacklock keeps the "
                                                     "generations"}
    for venv, expect in places.items():
        for extra in (["--dry-run"], []):
            refused(run_cli("install", str(lock), "--venv", str(venv), "--python",
                            sys.executable, *extra, env=env), str(venv), expect)
            assert not venv.exists()


# -- untried: the runfile a lock names, and where it goes ---------------------------


def _toolkit_dry_run(lock: Path, tmp_path: Path, *extra: str
                     ) -> subprocess.CompletedProcess[str]:
    return run_cli("install", str(lock), "--venv", str(tmp_path / "venv"), "--python",
                   sys.executable, "--dry-run", "--allow-no-gpu", *extra,
                   env=hostile_env(tmp_path))


def _problem(result: subprocess.CompletedProcess[str], check: str) -> str:
    """Preflight's refusal (exit 2, its header, one line a problem): the line of
    ``check``."""
    assert result.returncode == 2, (result.stdout, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "stacklock: error: preflight failed, nothing was changed:"
    return next(line for line in lines[1:] if line.strip().startswith(f"{check}:"))


def test_a_runfile_the_catalog_does_not_know_needs_the_flag(
        server: tuple[str, Served], tmp_path: Path) -> None:
    """A lock is code: a runfile whose sha256 is not the catalog's for its release
    is refused before anything runs, and runs only with --allow-unknown-runfile
    (saying so, and saying it runs as root where stacklock is root). The
    catalog's own runfile of that release passes."""
    from stacklock.cuda.catalog import load_catalog
    from tests.helpers.runfile import VERSION, make_runfile, toolkit_lock

    base, served = server
    runfile = make_runfile(tmp_path)
    lock = toolkit_lock(tmp_path, base, served, runfile)
    line = _problem(_toolkit_dry_run(lock, tmp_path), "runfile")
    assert "is not a runfile stacklock knows" in line
    assert "--allow-unknown-runfile" in line
    assert ("as root" in line) == (os.geteuid() == 0)
    allowed = _toolkit_dry_run(lock, tmp_path, "--allow-unknown-runfile")
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert "NOT the catalog's" in allowed.stdout
    catalog = load_catalog().find(VERSION)
    assert catalog is not None
    known = catalog.runfile("linux-x86_64")
    assert known is not None and known.sha256
    real = toolkit_lock(tmp_path / "real", base, served, runfile,
                        sha256=known.sha256, size=known.size, md5=known.md5)
    result = _toolkit_dry_run(real, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    if os.geteuid() == 0:
        assert f"runs {known.runfile} as root" in result.stdout
        assert f"the catalog's for CUDA {VERSION}" in result.stdout


@pytest.mark.parametrize("where", ["/", "/usr", "venv", "state"])
def test_a_toolkit_prefix_of_the_system_or_the_venv_is_refused(
        server: tuple[str, Served], tmp_path: Path, where: str) -> None:
    from tests.helpers.runfile import make_runfile, toolkit_lock

    base, served = server
    prefix = {"venv": str(tmp_path / "venv" / "cuda"),
              "state": str(tmp_path / "venv.stacklock" / "cuda")}.get(where, where)
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    result = _toolkit_dry_run(lock, tmp_path, "--allow-unknown-runfile",
                              "--toolkit-prefix", prefix)
    problem = _problem(result, "toolkit")
    assert f"the toolkit prefix {prefix}" in problem
    assert ("top-level folder" if where in ("/", "/usr") else "inside") in problem


# -- untried: an archive whose bytes change between the dry run and the install -----


def test_an_archive_changed_after_the_dry_run_installs_nothing(
        small_lock: tuple[Path, str], tmp_path: Path) -> None:
    """A dry run is no promise about a file's bytes: the install checks them
    again (uv, against the lock's sha256), and a change leaves the venv as it
    was (here: not made)."""
    import hashlib

    from tests.helpers.install_server import DATA

    lock, _ = small_lock
    wheel = lock.parent / "six-1.17.0-py2.py3-none-any.whl"
    wheel.write_bytes((DATA / "wheels" / wheel.name).read_bytes())
    _package(lock, 2, {"name": "six", "version": "1.17.0", "archive": {
        "path": wheel.name,
        "hashes": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}}})
    venv = tmp_path / "venv"
    args = ("install", str(lock), "--venv", str(venv), "--python", sys.executable,
            "--no-validate")
    env = hostile_env(tmp_path)
    assert run_cli(*args, "--dry-run", env=env).returncode == 0
    data = bytearray(wheel.read_bytes())
    data[10] ^= 1
    wheel.write_bytes(bytes(data))
    refused(run_cli(*args, env=env), "sha256 mismatch", wheel.name)
    assert not venv.exists()


def test_a_directory_installs_as_it_is_when_install_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``directory`` entry has no hash (PEP 751): the dry run says it installs
    as it is when install runs, and a change made after the dry run is what
    installs."""
    from stacklock.install.run import install_lock
    from tests.helpers.projects import make_project

    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    project = make_project(tmp_path / "app" / "local", "fromdir", "2.0", "dir")
    lock = tmp_path / "app" / "pylock.toml"
    lock.write_text('lock-version = "1.0"\ncreated-by = "pip"\n\n[[packages]]\n'
                    'name = "fromdir"\ndirectory = { path = "local" }\n')
    venv = tmp_path / "env"
    plan = install_lock(lock, venv=venv, python=sys.executable, dry_run=True,
                        allow_no_gpu=True)
    assert any("a directory installs as it is when install runs" in n
               for n in plan.notes), plan.notes
    (project / "fromdir" / "__init__.py").write_text("VALUE = 'changed'\n")
    install_lock(lock, venv=venv, python=sys.executable, allow_no_gpu=True,
                 validate=False)
    shown = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import fromdir; print(fromdir.VALUE)"],
                           capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "changed"


_NOT_UTF8 = """#!/bin/sh
# an interpreter stand-in whose every output is not UTF-8 (a C extension's
# banner in Latin-1, a crash dump): what validate reads from a venv's python
printf '\\377\\376 out \\377\\n'
printf '\\377 err \\376\\n' >&2
exit 1
"""


def test_validate_reads_a_python_that_prints_no_utf8(tmp_path: Path):
    """validate's probes read their interpreter's output with replacement
    characters: one line naming the interpreter, never a UnicodeDecodeError."""
    python = tmp_path / "python"
    python.write_text(_NOT_UTF8)
    python.chmod(0o755)
    lock = Path(__file__).resolve().parents[2] / "locks" / "pylock.pypi-small.toml"
    line = refused(run_cli("validate", str(lock), "--python", str(python),
                           env=hostile_env(tmp_path)), str(python), "err")
    assert "\ufffd" in line

    from stacklock.validate.imports import _run_import
    from stacklock.validate.probes import read_venv_info

    assert read_venv_info(python)["error"] == "probe exited 1: \ufffd err \ufffd"
    outcome = _run_import(python, "torch", 60)
    assert (outcome["ok"], outcome["message"]) == (False, "\ufffd err \ufffd")
