"""The pack format offline: packs written from the real recorded wheels in
tests/data/install/ (and the stacklock wheel made from this checkout), read back by
the standard-library reader, by tar and by ``python3 PACK``, then damaged."""

from __future__ import annotations

import hashlib
import io
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from stacklock.errors import PackError
from stacklock.lock import load_lock, wheel_sha256
from stacklock.pack.format import (
    check_node,
    check_space,
    copy_member,
    is_pack,
    read_manifest,
    render_listing,
)
from stacklock.pack.install import unpack_verified
from stacklock.pack.tools import make_self_wheel
from stacklock.pack.writer import glibc_floor
from stacklock.store import ArtifactStore
from tests.helpers.data import DATA, ROOT
from tests.helpers.jsonout import parse_output
from tests.helpers.packs import write_small_pack

INSTALL = DATA / "install"
LOCKS = ROOT / "locks"


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return write_small_pack(tmp_path / "small.pack")


def test_manifest_holds_the_locks_hashes_and_tar_lists_the_payload(pack: Path):
    manifest = read_manifest(pack)
    lock = load_lock(INSTALL / "pylock.small.toml")
    locked = {p.wheels[0].filename: wheel_sha256(p.wheels[0]) for p in lock.packages}
    assert {m.name: m.sha256 for m in manifest.of_kind("wheel")} == locked
    with tarfile.open(pack) as tar:  # plain tar reads the front, ignores the zip
        names = tar.getnames()
        wheel = tar.extractfile(f"wheels/{next(iter(locked))}")
        assert wheel is not None
        assert hashlib.sha256(wheel.read()).hexdigest() == locked[next(iter(locked))]
    assert names == sorted(names) and "lock/pylock.small.toml" in names
    assert all(info.mtime == 0 and info.uid == 0 for info in tarfile.open(pack))
    assert is_pack(pack) and not is_pack(INSTALL / "pylock.small.toml")


def test_same_inputs_same_bytes(tmp_path: Path):
    first = write_small_pack(tmp_path / "a.pack").read_bytes()
    assert write_small_pack(tmp_path / "b.pack").read_bytes() == first


def test_python_runs_the_pack_and_lists_it(pack: Path):
    out = subprocess.run([sys.executable, str(pack), "list", "--json"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    listed = parse_output(out.stdout)
    assert listed["size"] == pack.stat().st_size
    assert {m["path"] for m in listed["members"]} == {
        m.path for m in read_manifest(pack).members}
    text = render_listing(read_manifest(pack), pack, pack.stat().st_size)
    assert "target: Python 3.11, linux_x86_64" in text
    assert "six-1.17.0-py2.py3-none-any.whl" in text


def test_the_stacklock_wheel_is_a_valid_wheel_of_this_code():
    name, data = make_self_wheel()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        record = zf.read("stacklock-0.1.0.dist-info/RECORD").decode()
        meta = zf.read("stacklock-0.1.0.dist-info/METADATA").decode()
        here = ROOT / "stacklock" / "pack" / "boot.py"
        assert zf.read("stacklock/pack/boot.py") == here.read_bytes()
        assert not [n for n in zf.namelist() if n.endswith(".pyc")]
    assert name == "stacklock-0.1.0-py3-none-any.whl"
    assert "Requires-Dist: uv>=0.9" in meta and "pytest" not in meta
    assert "stacklock/pack/boot.py,sha256=" in record
    # matplotlib only with the plots extra, as in stacklock's own metadata
    assert "Provides-Extra: plots" in meta
    matplotlib = [ln for ln in meta.splitlines() if "matplotlib" in ln]
    assert matplotlib == ["Requires-Dist: matplotlib>=3.8; extra == 'plots'"]


def test_an_altered_wheel_is_refused_and_the_store_is_left_as_it_was(
        pack: Path, tmp_path: Path):
    manifest = read_manifest(pack)
    victim = manifest.of_kind("wheel")[1]
    with pack.open("r+b") as fh:
        fh.seek(victim.offset + 10)
        byte = fh.read(1)
        fh.seek(victim.offset + 10)
        fh.write(bytes([byte[0] ^ 0x01]))
    store = ArtifactStore(tmp_path / "cache" / "artifacts")
    with pytest.raises(PackError, match=f"{victim.path} was altered"):
        unpack_verified(pack, manifest, store, lock_to=tmp_path / "lock.toml")
    assert not (tmp_path / "cache").exists()  # not even the folders
    assert not (tmp_path / "lock.toml").exists()
    with pytest.raises(PackError):
        copy_member(pack, victim, tmp_path / "out.whl")
    assert not (tmp_path / "out.whl").exists()


def test_unpack_fills_the_store_with_checked_files(pack: Path, tmp_path: Path):
    manifest = read_manifest(pack)
    store = ArtifactStore(tmp_path / "cache" / "artifacts")
    unpack_verified(pack, manifest, store, lock_to=tmp_path / "lock.toml")
    for member in manifest.of_kind("wheel"):
        path = store.path_for(member.sha256)
        assert path is not None
        assert hashlib.sha256(path.read_bytes()).hexdigest() == member.sha256
    assert (tmp_path / "lock.toml").read_bytes() == (
        INSTALL / "pylock.small.toml").read_bytes()
    assert sorted(p.name for p in (tmp_path / "cache/artifacts").iterdir()) == [
        "sha256"]  # the scratch folder is gone


def test_a_pack_without_its_end_or_with_bytes_missing_is_refused(
        pack: Path, tmp_path: Path):
    data = pack.read_bytes()
    cut = tmp_path / "cut.pack"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(PackError, match="not a stacklock pack, or its end is missing"):
        read_manifest(cut)
    gap = tmp_path / "gap.pack"
    gap.write_bytes(data[:2048] + data[2048 + 512:])  # one block lost in the middle
    with pytest.raises(PackError, match="truncated or altered"):
        read_manifest(gap)
    out = subprocess.run([sys.executable, str(gap), "list"], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "truncated or altered" in out.stderr


def test_a_pack_for_another_node_is_refused(pack: Path):
    manifest = read_manifest(pack)
    check_node(manifest, pack, python=(3, 11), machine="x86_64", glibc=(2, 17))
    with pytest.raises(PackError, match=r"made for Python 3\.11 \(this is 3\.12\)"):
        check_node(manifest, pack, python=(3, 12), machine="x86_64")
    with pytest.raises(PackError, match=r"x86_64 \(this is aarch64\)"):
        check_node(manifest, pack, python=(3, 11), machine="aarch64")


def test_too_little_disk_is_refused(pack: Path, tmp_path: Path):
    with pytest.raises(PackError, match="GB is needed to unpack and install"):
        check_space({tmp_path / "not" / "yet": 1 << 62}, pack)
    check_space({tmp_path / "not" / "yet": 1}, pack)
    assert not (tmp_path / "not").exists()


def test_glibc_floor_of_real_locked_wheels():
    lock = load_lock(LOCKS / "pylock.pypi-cu130.toml")
    names = [w.filename for p in lock.packages for w in p.wheels]
    # sglang 0.5.23 ships manylinux_2_34 wheels only (README): the floor
    assert glibc_floor(names) == "2.34"
    assert glibc_floor(["six-1.17.0-py2.py3-none-any.whl"]) is None
    assert glibc_floor([
        "numpy-2.5.5-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        "kiwisolver-1.5.1-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    ]) == "2.27"


@pytest.mark.parametrize(("command", "flag"), [
    ("install", "--allow-no-gpu"), ("validate", "--allow-no-gpu"),
    ("install", "--allow-unknown-runfile")])
def test_a_flag_reaches_stacklock_on_the_node(pack: Path, tmp_path: Path,
                                              command: str, flag: str):
    """``python3 PACK install|validate --allow-no-gpu`` (an image build) hands the
    flag to the stacklock it runs, so its validation skips what needs a GPU;
    ``install --allow-unknown-runfile`` lets that stacklock run a runfile the
    catalog does not know."""
    from stacklock.pack.boot import _command, _parser

    args = _parser("python3 small.pack").parse_args(
        [command, "--venv", str(tmp_path / "env"), flag])
    (tmp_path / "scratch").mkdir()
    argv = _command(args, pack, read_manifest(pack), tmp_path / "bin" / "stacklock",
                    tmp_path / "scratch", tmp_path / "cache")
    assert argv[1] == command and flag in argv
    plain = _parser("python3 small.pack").parse_args([command, "--venv", "env"])
    assert flag not in _command(
        plain, pack, read_manifest(pack), tmp_path / "bin" / "stacklock",
        tmp_path / "scratch", tmp_path / "cache")


def test_the_bootstraps_uv_ignores_the_users_uv_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bootstrap builds its own venv with real uv from the pack's uv wheel
    while the environment holds UV_CONSTRAINT (stacklock pinned to a version
    that does not exist), UV_OVERRIDE, UV_REQUIRE_HASHES and a UV_CONFIG_FILE
    that is not there: each stopped it ("uv pip install of stacklock (the
    bootstrap) failed"); it drops them as stacklock install does (one list,
    stacklock.install.uvsteps, carried in the pack)."""
    from stacklock.pack.boot import _env, _tool_venv
    from tests.helpers.packs import write_small_pack

    pack = write_small_pack(tmp_path / "small.pack", with_uv=True)
    pins = tmp_path / "pins.txt"
    pins.write_text("stacklock==0.0.1\n")
    for key, value in {"UV_CONSTRAINT": str(pins), "UV_OVERRIDE": str(pins),
                       "UV_REQUIRE_HASHES": "1",
                       "UV_CONFIG_FILE": str(tmp_path / "absent.toml")}.items():
        monkeypatch.setenv(key, value)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = _env(scratch, tmp_path / "cache")
    assert not any(k in env for k in ("UV_CONSTRAINT", "UV_OVERRIDE",
                                      "UV_REQUIRE_HASHES", "UV_CONFIG_FILE"))
    tool = _tool_venv(pack, read_manifest(pack), scratch, env)
    assert tool == scratch / "tool" / "bin" / "stacklock" and tool.is_file()
    assert list((scratch / "tool").glob("lib/python*/site-packages/"
                                        "stacklock-*.dist-info"))


@pytest.mark.parametrize("option", ["--report", "--report-dir"])
def test_the_bootstrap_takes_report_as_install_does(pack: Path, tmp_path: Path,
                                                    option: str):
    from stacklock.pack.boot import _command, _parser

    args = _parser("python3 small.pack").parse_args(
        ["install", "--venv", "env", option, str(tmp_path / "out")])
    (tmp_path / "scratch").mkdir()
    argv = _command(args, pack, read_manifest(pack), tmp_path / "bin" / "stacklock",
                    tmp_path / "scratch", tmp_path / "cache")
    assert argv[-2:] == ["--report", str(tmp_path / "out")]


_CHILD = """
import os, pathlib, signal, sys, time
def stop(signo, frame):  # as stacklock does: clean up, then end by the signal
    pathlib.Path(sys.argv[1]).write_text(signal.Signals(signo).name)
    signal.signal(signo, signal.SIG_DFL)
    os.kill(os.getpid(), signo)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
print("ready", flush=True)
time.sleep(60)
"""


def _bootstrap(told: Path, *signals: str) -> subprocess.Popen[str]:
    """A process running the bootstrap's hand-on around the child above, with
    ``signals`` (``"SIGHUP", "SIG_IGN"``...) set first as its parent left them;
    started once the child is ready for a signal."""
    outer = ("import os, signal, sys\n"
             + "".join(f"signal.signal(signal.{signo}, signal.{how})\n"
                       for signo, how in zip(signals[::2], signals[1::2],
                                             strict=True))
             + "from stacklock.pack.boot import run_handing_on_stops\n"
             f"print(run_handing_on_stops([sys.executable, '-c', {_CHILD!r}, "
             f"{str(told)!r}], dict(os.environ)))\n")
    proc = subprocess.Popen([sys.executable, "-c", outer], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGHUP])
def test_the_bootstrap_hands_a_stop_on_and_waits(tmp_path: Path, signo: int):
    """SIGTERM or SIGHUP sent to ``python3 PACK install`` alone (a cancelled Slurm
    or CI job) reaches the stacklock it runs, which cleans up; the bootstrap
    waits for it rather than dying with it still running."""
    told = tmp_path / "told"
    # as from a terminal: a run under nohup ignores SIGHUP, and so does the
    # bootstrap then (the test after this one), leaving nothing to hand on
    with _bootstrap(told, signal.Signals(signo).name, "SIG_DFL") as proc:
        proc.send_signal(signo)
        rest = proc.stdout.read() if proc.stdout else ""
    assert proc.wait(timeout=60) == 0
    assert rest == f"{-signo}\n"  # the child ended by the signal it was handed
    assert told.read_text() == signal.Signals(signo).name


def test_the_bootstrap_under_nohup_keeps_ignoring_sighup(tmp_path: Path):
    """Run under nohup (SIGHUP ignored), a SIGHUP is not handed on, as nohup
    promises; a SIGTERM still is."""
    told = tmp_path / "told"
    with _bootstrap(told, "SIGHUP", "SIG_IGN", "SIGTERM", "SIG_DFL") as proc:
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert proc.poll() is None and not told.exists()
        proc.send_signal(signal.SIGTERM)
        rest = proc.stdout.read() if proc.stdout else ""
    assert proc.wait(timeout=60) == 0
    assert rest == f"{-signal.SIGTERM}\n"
    assert told.read_text() == "SIGTERM"
