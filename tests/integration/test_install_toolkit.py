"""The runfile path, with a small self-extracting script in the runfile's shape.

The test builds a makeself-like ``.run`` (a shell header, ``exit``, then an
archive payload) that records the arguments it gets, refuses ``--driver`` the way
a toolkit-only run must never need, writes the installer log, "installs" a
toolkit (bin/nvcc, version.json) into ``--toolkitpath`` and, as NVIDIA's installer
may, points the machine's ``cuda`` symlink (a temporary ``usr-local/cuda`` here)
at it: install must put that link back.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomlkit

from stacklock.errors import HashMismatchError, InstallError, LockError, PreflightError
from stacklock.install.inputs import Wanted
from stacklock.install.render import render_install
from stacklock.install.run import install_lock
from stacklock.install.toolkit import write_activation
from tests.helpers.install_server import Served, local_lock, tree_state
from tests.helpers.runfile import VERSION, make_runfile, toolkit_lock

PY = sys.executable

@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # where nothing may be written unasked
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("STACKLOCK_DRIVER_VERSION", "580.159.04")  # the H200's


def _install(tmp_path: Path, lock: Path, **kw: object):  # type: ignore[no-untyped-def]
    """Install with this file's runfile, which the catalog does not know."""
    kw.setdefault("wanted", Wanted(unknown_runfile=True))
    return install_lock(
        lock,
        venv=tmp_path / "env",
        python=PY,
        installer_log=tmp_path / "cuda-installer.log",
        system_installer_log=tmp_path / "var-log-cuda-installer.log",
        cuda_link=tmp_path / "usr-local" / "cuda",
        **kw,  # type: ignore[arg-type]
    )


def test_runfile_resumed_verified_and_run_toolkit_only(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    runfile = make_runfile(tmp_path)
    lock = toolkit_lock(tmp_path, base, served, runfile)
    served.cut_after["/cuda/cuda_13.0.1_580.82.07_linux.run"] = 100_000
    (tmp_path / "cuda-installer.log").write_text("stale log of an earlier run\n")
    seen: list[tuple[str, int, int | None]] = []
    result = _install(tmp_path, lock, on_download=lambda *a: seen.append(a))
    prefix = tmp_path / "usr-local" / "cuda-13.0"
    # resumed: a second request asked for the rest with a Range header
    ranges = [r for p, r in served.requests if p.startswith("/cuda/")]
    assert ranges[0] is None and ranges[1] is not None
    assert int(ranges[1].removeprefix("bytes=").rstrip("-")) > 0
    runfile_name = "cuda_13.0.1_580.82.07_linux.run"
    assert seen[-1] == (runfile_name, len(runfile), len(runfile))
    # the runfile is stacklock's download; uv fetches the wheels (hash-checked)
    assert {name for name, _, _ in seen} == {runfile_name}
    args = (tmp_path / "runfile-args.txt").read_text().split()
    assert "--silent" in args and "--toolkit" in args
    # the lock's install-args lack --override; the plan adds it (compiler checks)
    assert "--override" in args
    assert f"--toolkitpath={prefix}" in args
    assert not any(a.startswith(("--driver", "--kernelobjects")) for a in args)
    assert any(a.startswith("--tmpdir=") for a in args)
    assert (prefix / "bin" / "nvcc").is_file()
    # the stale log was kept aside, the new one kept in the logs, /tmp left clean
    assert not (tmp_path / "cuda-installer.log").exists()
    assert result.logs["previous-cuda-installer"].read_text().startswith("stale")
    assert "Installed in" in result.logs["cuda-installer"].read_text()
    assert "root's log" in result.logs["cuda-installer-system"].read_text()
    # the activation file sets up the venv and the toolkit
    out = subprocess.run(
        ["bash", "-c", f". {tmp_path / 'env' / 'stacklock-activate.sh'} && "
         'echo "$CUDA_HOME" && command -v nvcc && command -v python'],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert out == [
        str(prefix),
        str(prefix / "bin" / "nvcc"),
        str((tmp_path / "env").resolve() / "bin/python"),  # uv's activate: real path
    ]


def test_second_install_finds_the_toolkit_and_skips_the_runfile(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    _install(tmp_path, lock)
    (tmp_path / "runfile-args.txt").unlink()
    again = _install(tmp_path, lock)
    assert again.plan.runfile_command is None
    assert not (tmp_path / "runfile-args.txt").exists()
    assert any("not reinstalled" in n for n in again.notes)


@pytest.mark.parametrize("key", ["sha256", "md5"])
def test_checksum_mismatch_never_runs_the_runfile(
    server: tuple[str, Served], tmp_path: Path, key: str
) -> None:
    base, served = server
    runfile = make_runfile(tmp_path)
    wrong = hashlib.new(key, runfile + b"x").hexdigest()
    lock = toolkit_lock(tmp_path, base, served, runfile, **{key: wrong})
    error = HashMismatchError if key == "sha256" else InstallError
    with pytest.raises(error, match=key):
        _install(tmp_path, lock)
    assert not (tmp_path / "runfile-args.txt").exists()
    assert not os.path.lexists(tmp_path / "env")
    assert not (tmp_path / "usr-local").exists()


def test_a_driver_flag_in_the_lock_is_refused(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = toolkit_lock(
        tmp_path, base, served, make_runfile(tmp_path),
        **{"install-args": ["--silent", "--driver", "--toolkit"]},
    )  # fmt: skip
    with pytest.raises(LockError, match="--driver"):
        _install(tmp_path, lock)
    assert served.requests == []


def test_failed_runfile_removes_its_prefix_and_keeps_the_venv(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    good = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    _install(tmp_path, good, no_toolkit=True)
    gen1 = tmp_path / "env.stacklock" / "1"
    before = tree_state(gen1) | tree_state(tmp_path / "env")
    bad = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path, rc=1))
    with pytest.raises(InstallError, match="runfile install failed"):
        _install(tmp_path, bad)
    assert not (tmp_path / "usr-local" / "cuda-13.0").exists()
    assert tree_state(gen1) | tree_state(tmp_path / "env") == before
    left = sorted(p.name for p in (tmp_path / "env.stacklock").iterdir())
    assert left == [
        "1",
        "1.ok",
        "pylock.generation-1.toml",
        "validate",  # the first install's report (no snapshot: it did not replace 1)
    ]


def test_link_cuda_only_when_asked(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    old = tmp_path / "usr-local" / "cuda-12.8"
    old.mkdir(parents=True)
    link = tmp_path / "usr-local" / "cuda"
    link.symlink_to(old)
    result = _install(tmp_path, lock)
    # the runfile re-pointed it at cuda-13.0; install put it back
    assert os.readlink(link) == str(old)
    assert f"the runfile left {link} a symlink to {tmp_path}/usr-local/cuda-13.0 " \
        f"(it was a symlink to {old}); put back to {old}" in " ".join(result.notes)
    shutil.rmtree(tmp_path / "usr-local" / "cuda-13.0")
    _install(tmp_path, lock, link_cuda_at=link)
    assert link.resolve() == tmp_path / "usr-local" / "cuda-13.0"


def test_dry_run_shows_runfile_command_and_changes_nothing(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    before = tree_state(tmp_path)
    result = _install(tmp_path, lock, dry_run=True)
    assert tree_state(tmp_path) == before and served.requests == []
    text = render_install(result)
    assert "runfile cuda_13.0.1_580.82.07_linux.run" in text
    assert "--toolkit" in text and "--driver" not in text
    assert result.plan.to_dict()["runfile_command"][0] == "sh"


def test_driver_too_old_fails_preflight(
    server: tuple[str, Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    monkeypatch.setenv("STACKLOCK_DRIVER_VERSION", "450.80.02")
    with pytest.raises(PreflightError) as info:
        _install(tmp_path, lock)
    assert [p.check for p in info.value.problems] == ["driver"]
    assert "450.80.02" in str(info.value)
    assert served.requests == []


@pytest.mark.skipif(
    Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi"),
    reason="this machine has an NVIDIA driver",
)
def test_no_gpu_needs_allow_no_gpu(
    server: tuple[str, Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    monkeypatch.delenv("STACKLOCK_DRIVER_VERSION")
    with pytest.raises(PreflightError, match="--allow-no-gpu"):
        _install(tmp_path, lock, dry_run=True)
    result = _install(tmp_path, lock, dry_run=True, allow_no_gpu=True)
    assert any("--allow-no-gpu" in n for n in result.notes)


def test_pypi_toolkit_needs_no_runfile(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    """``source = "pypi"``: the toolkit comes in wheels; nothing else is fetched."""
    base, served = server
    lock = local_lock(base, served, tmp_path / "lock" / "pylock.small.toml")
    data = tomllib.loads(lock.read_text())
    data["tool"] = {"stacklock": {"lock-version": 1,
                                  "cuda": {"version": "13.0.1", "source": "pypi"}}}
    lock.write_text(tomlkit.dumps(data))
    result = _install(tmp_path, lock, validate=False)
    assert result.plan.runfile_command is None and result.plan.toolkit_prefix is None
    assert {d.kind for d in result.plan.downloads} == {"wheel"}
    assert "CUDA_HOME" not in (tmp_path / "env" / "stacklock-activate.sh").read_text()


def test_activation_sets_cuda_home_lib_or_lib64(tmp_path: Path) -> None:
    """The CUDA 13 wheels keep libraries in ``lib`` (``nvidia/cu13/lib``), the
    runfile in ``lib64``: LD_LIBRARY_PATH follows the prefix's layout. Where a pypi
    toolkit's home is found is tested on the real wheels' RECORD in
    tests/integration/test_validate_toolkit.py."""
    home = tmp_path / "site-packages" / "nvidia" / "cu13"
    (home / "lib").mkdir(parents=True)
    text = write_activation(tmp_path / "act.sh", venv=tmp_path / "gen",
                            prefix=home).read_text()
    assert f"export CUDA_HOME={home}" in text
    assert 'LD_LIBRARY_PATH="$CUDA_HOME/lib${' in text
    runfile_home = tmp_path / "cuda-13.0"
    (runfile_home / "lib64").mkdir(parents=True)
    text = write_activation(tmp_path / "act2.sh", venv=tmp_path / "gen",
                            prefix=runfile_home).read_text()
    assert 'LD_LIBRARY_PATH="$CUDA_HOME/lib64${' in text


def test_toolkit_prefix_is_the_one_validation_checks(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    """``--toolkit-prefix`` moves the runfile's toolkit; the validation that ends
    the install checks it there, not at the lock's prefix (which stays empty)."""
    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    elsewhere = tmp_path / "opt" / "cuda-13.0"
    result = _install(tmp_path, lock, toolkit_prefix=elsewhere)
    assert (elsewhere / "version.json").is_file()
    assert not (tmp_path / "usr-local" / "cuda-13.0").exists()
    assert result.validation is not None
    toolkit = {c.name: c for c in result.validation.checks}["toolkit"]
    assert toolkit.status == "pass", toolkit.reason
    assert toolkit.reason == f"CUDA {VERSION} at {elsewhere} (version.json)"


def test_a_link_the_runfile_creates_is_removed(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    """No ``cuda`` link before the install, none after (the runfile made one)."""
    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    link = tmp_path / "usr-local" / "cuda"
    result = _install(tmp_path, lock)
    assert (tmp_path / "usr-local" / "cuda-13.0" / "version.json").is_file()
    assert not os.path.lexists(link)
    assert any(n.startswith(f"the runfile left {link} a symlink to ")
               and n.endswith("(it was absent); removed (only --link-cuda sets it)")
               for n in result.notes)


def test_a_failed_runfile_puts_the_link_back_too(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    old = tmp_path / "usr-local" / "cuda-12.8"
    old.mkdir(parents=True)
    link = tmp_path / "usr-local" / "cuda"
    link.symlink_to(old)
    bad = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path, rc=1))
    with pytest.raises(InstallError, match="runfile install failed"):
        _install(tmp_path, bad)
    assert os.readlink(link) == str(old)
    assert not (tmp_path / "usr-local" / "cuda-13.0").exists()


def test_a_directory_in_the_links_place_is_never_removed(tmp_path: Path) -> None:
    """A real directory where ``cuda`` is: left alone when the runfile leaves it
    alone; replaced by a link, it cannot be put back, and the note says so."""
    from stacklock.install.cuda_link import read_link_state, restore_link_state

    folder = tmp_path / "cuda"
    (folder / "bin").mkdir(parents=True)
    before = read_link_state(folder)
    assert before.kind == "directory"
    assert restore_link_state(before) is None
    subprocess.run(["sh", "-c", f"rm -rf '{folder}' && ln -s cuda-13.0 '{folder}'"],
                   check=True)
    note = restore_link_state(before)
    assert note == (f"the runfile left {folder} a symlink to cuda-13.0 (it was a "
                    "directory); not put back: stacklock never removes or recreates "
                    "a directory")
    assert os.readlink(folder) == "cuda-13.0"


# -- the runfile, said as it starts, on every path that can run one ------------------


def _machine_paths_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                        module: object, capsys: pytest.CaptureFixture[str]
                        ) -> list[str]:
    """``module.install_lock`` with this test's installer logs and cuda link
    (not the machine's), and a runner that runs everything for real, keeping
    what stderr held the moment the runfile started."""
    from functools import partial

    from stacklock.runner import SubprocessRunner

    seen: list[str] = []

    class Watching(SubprocessRunner):
        def run(self, argv, **kw):  # type: ignore[no-untyped-def,override]
            if any(a.startswith("--toolkitpath=") for a in argv):
                seen.append(capsys.readouterr().err)
            return super().run(argv, **kw)

    monkeypatch.setattr(module, "install_lock", partial(
        install_lock, runner=Watching(),
        installer_log=tmp_path / "cuda-installer.log",
        system_installer_log=tmp_path / "var-log-cuda-installer.log",
        cuda_link=tmp_path / "usr-local" / "cuda"))
    return seen


def _notice(lock: Path) -> str:
    from stacklock.lock import load_lock

    cuda = load_lock(lock).cuda
    assert cuda is not None
    root = " as root" if os.geteuid() == 0 else ""
    return (f"stacklock: running {cuda.runfile}{root}: sha256 {cuda.sha256}, NOT the "
            "catalog's (the catalog's is ")


def test_install_says_which_runfile_runs_as_root_as_it_starts(
    server: tuple[str, Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The plan said it; the install says it again the moment the runfile starts
    (on stderr, -q or not): which runfile, its sha256, that it runs as root and
    that only --allow-unknown-runfile lets it."""
    import stacklock.install.run as run
    from stacklock.cli import main

    base, served = server
    lock = toolkit_lock(tmp_path, base, served, make_runfile(tmp_path))
    seen = _machine_paths_here(monkeypatch, tmp_path, run, capsys)
    code = main(["install", str(lock), "--venv", str(tmp_path / "env"), "--python",
                 PY, "--no-validate", "--allow-unknown-runfile", "-q"])
    assert code == 0
    (before,) = seen
    lines = [line for line in before.splitlines() if "running" in line]
    assert len(lines) == 1 and lines[0].startswith(_notice(lock)), before
    assert lines[0].endswith("allowed by --allow-unknown-runfile")


def test_a_pack_and_bisect_run_an_unknown_runfile_only_when_told(
    server: tuple[str, Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``stacklock install PACK`` (what the pack's bootstrap hands on to) and
    bisect's installs refuse a runfile the catalog does not know, as install
    does, and take --allow-unknown-runfile (neither could run one before), saying
    it as it starts."""
    import stacklock.cli.bisect as bisect_cli
    import stacklock.install.run as run
    import stacklock.pack.install as pack_install
    from stacklock.cli import main
    from tests.helpers.packs import write_lock_pack

    base, served = server
    runfile = make_runfile(tmp_path)
    lock = toolkit_lock(tmp_path, base, served, runfile)
    pack = write_lock_pack(lock, tmp_path / "toolkit.pack", runfile=runfile)
    seen = _machine_paths_here(monkeypatch, tmp_path, pack_install, capsys)
    args = ["install", str(pack), "--venv", str(tmp_path / "env"), "--python", PY,
            "--allow-no-gpu"]
    assert main(args) == 2
    refusal = capsys.readouterr().err
    assert "runfile: cuda_13.0.1_580.82.07_linux.run: sha256" in refusal
    assert not (tmp_path / "runfile-args.txt").exists()
    assert main([*args, "--allow-unknown-runfile"]) == 0, capsys.readouterr().err
    assert (tmp_path / "runfile-args.txt").exists() and len(seen) == 1
    assert _notice(lock) in seen[0]

    seen = _machine_paths_here(monkeypatch, tmp_path, run, capsys)
    shutil.rmtree(tmp_path / "usr-local" / "cuda-13.0")
    for allowed in (False, True):
        parsed = _bisect_args(lock, allowed)
        install = bisect_cli._installer(parsed, None, unknown_runfile=allowed)
        venv = tmp_path / f"bisect-{allowed}"
        if not allowed:
            with pytest.raises(PreflightError, match="not a runfile stacklock knows"):
                install(lock, venv)
            continue
        install(lock, venv)
        assert len(seen) == 1 and _notice(lock) in seen[0]


def _bisect_args(lock: Path, allowed: bool):  # type: ignore[no-untyped-def]
    from stacklock.cli.parser import build_parser

    flag = ["--allow-unknown-runfile"] if allowed else []
    return build_parser().parse_args(["bisect", str(lock), str(lock), "--python", PY,
                                      *flag, "--", "true"])
