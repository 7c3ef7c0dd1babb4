"""Hostile RECORD files, given to every reader of one (stacklock.record): a
patched wheel's RECORD in ``resolve`` (a real wheel from a loopback index, its
RECORD replaced), an installed one in ``validate``, ``snapshot`` and the CUDA
finder (a real venv made by uv, its RECORD replaced). A row of 10 MB, a NUL
byte, a path leaving the wheel or the venv, rows of other shapes, a million
lines, 65 MiB, a FIFO: each is one line naming the file and line, never a
traceback or a hang; validate's answer is "no" for that distribution."""

from __future__ import annotations

import io
import os
import shutil
import threading
import zipfile
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.cuda.wheels import find_wheel_toolkit, site_packages
from stacklock.errors import RecordError
from stacklock.lock import load_lock
from stacklock.validate.checks import check_wheel_hashes
from stacklock.validate.run import read_distributions
from tests.helpers.data import DATA
from tests.helpers.hostile import hostile_env, refused, run_cli
from tests.helpers.patched import INICONFIG, WHEELS, semicolon, serve_index
from tests.helpers.wheelkit import build_wheel, make_venv, uv_install, write_lock

GOOD_ROW = b"tinypkg/__init__.py,sha256=YWJj,3\n"


def hostile_records(up: bytes) -> dict[str, tuple[bytes, str]]:
    """Name -> (RECORD bytes, what the error says); ``up`` is a path prefix
    that leaves the place a RECORD's paths live in."""
    return {
        "ten-megabyte-row": (GOOD_ROW + b"x/" + b"a" * (10 << 20) + b".py,,\n",
                             "line 2: a row of 10,485,767 characters"),
        "nul-byte": (GOOD_ROW + b"tinypkg/a\x00.py,sha256=YWJj,3\n",
                     "line 2: a path holding the control character '\\x00'"),
        "leaves": (up + b"etc/passwd,sha256=YWJj,3\n", "line 1: a path that leaves"),
        "absolute": (b"/etc/passwd,sha256=YWJj,3\n", "line 1: an absolute path"),
        "two-fields": (b"tinypkg/__init__.py,sha256=YWJj\n", "line 1: 2 fields"),
        "million-lines": (b"\n" * 1_000_002, "more than 1,000,000 rows"),
        "not-csv": (b'"tinypkg/x.py"y,sha256=YWJj,3\n', "line 1: not CSV"),
    }


# -- a patched wheel's RECORD, read by resolve ------------------------------------


def _with_record(record: bytes) -> bytes:
    """The real iniconfig wheel with its RECORD replaced by ``record``."""
    out = io.BytesIO()
    with zipfile.ZipFile(WHEELS / INICONFIG) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = record
            dst.writestr(info.filename, data)
    return out.getvalue()


def test_resolve_refuses_a_patched_wheels_hostile_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Read in part over HTTP ranges (the RECORD of 10 MB is 10 kB compressed)
    and, for the 65 MiB one, refused by its size before it is inflated. Each
    was a csv.Error traceback (field larger than field limit), or a lock made."""
    from tests.helpers.patched import write_profile

    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    cases = hostile_records(b"../")
    cases["65-mib"] = (b"\n" * (65 << 20), "68,157,440 bytes, larger than 64 MiB")
    member = "iniconfig-2.3.1.dist-info/RECORD"
    for name, (record, expect) in cases.items():
        folder = tmp_path / name
        with serve_index() as index:
            index.files[INICONFIG] = _with_record(record)
            profile = write_profile(folder, index.url, patches=[semicolon(folder)])
            out = folder / "pylock.toml"
            code = main(["resolve", str(profile), "-o", str(out), "--no-check"])
        printed = capsys.readouterr()
        line = refused_line(code, printed.err)
        assert f"{INICONFIG}: {member}: " in line and expect in line, (name, line)
        assert not out.exists()


def refused_line(code: int, err: str) -> str:
    import subprocess

    return refused(subprocess.CompletedProcess([], code, "", err))


# -- an installed RECORD: validate, snapshot, the CUDA finder ---------------------


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(venv, its lock, tinypkg's dist-info): a wheel built here, installed by
    uv into a fresh venv."""
    wheel = build_wheel(tmp_path / "w", "tinypkg", "0.3.1",
                        {"tinypkg/__init__.py": b"X = 3\n"})
    python = make_venv(tmp_path / "venv")
    uv_install(python, wheel)
    lock = write_lock(tmp_path / "pylock.toml", [wheel])
    (dist_info,) = site_packages(tmp_path / "venv")[0].glob("tinypkg-*.dist-info")
    return tmp_path / "venv", lock, dist_info


def _fifo_record(dist_info: Path) -> threading.Timer:
    """RECORD made a FIFO; a writer after 30 s unblocks a reader that waits."""
    record = dist_info / "RECORD"
    record.unlink()
    os.mkfifo(record)
    writer = threading.Timer(30, lambda: record.open("w").close())
    writer.start()
    return writer


def test_validate_says_no_for_a_hostile_installed_record(
        installed: tuple[Path, Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The wheel-hashes check fails for the distribution, naming its RECORD and
    the line; a FIFO as RECORD, or listed in it, never blocks (each did)."""
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    venv, lock_path, dist_info = installed
    lock = load_lock(lock_path)
    dists = read_distributions(venv / "bin" / "python")
    record = dist_info / "RECORD"
    original = record.read_bytes()
    assert check_wheel_hashes(lock, dists).status == "pass"
    for name, (content, expect) in hostile_records(b"../../../../").items():
        record.write_bytes(content)
        result = check_wheel_hashes(lock, dists)
        assert result.status == "fail", name
        assert result.reason.startswith(f"tinypkg: {record}: "), result.reason
        assert expect in result.reason, (name, result.reason)
        assert len(result.reason) < 1000
    fifo = dist_info.parent / "tinypkg" / "fifo"
    os.mkfifo(fifo)
    record.write_bytes(original + b"tinypkg/fifo,sha256=YWJj,3\n")
    writer = threading.Timer(30, lambda: fifo.open("w").close())
    writer.start()
    try:
        listed = check_wheel_hashes(lock, dists)
        assert listed.status == "fail" and "first: tinypkg/fifo" in listed.reason
        writer.cancel()
        writer = _fifo_record(dist_info)
        result = check_wheel_hashes(lock, dists)
    finally:
        writer.cancel()
    assert result.reason == f"tinypkg: {record}: not a regular file (a FIFO)"
    record.unlink()
    record.write_bytes(GOOD_ROW + b"x/" + b"a" * (10 << 20) + b".py,,\n")
    answer = run_cli("validate", str(lock_path), "--venv", str(venv),
                     "--allow-no-gpu", env=hostile_env(tmp_path))
    assert answer.returncode == 1, answer.stderr[-2000:]
    assert "Traceback" not in answer.stderr
    assert f"{record}: line 2: a row of 10,485,767 characters" in answer.stdout


def test_snapshot_warns_and_patches_refuse_a_hostile_installed_record(
        installed: tuple[Path, Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``snapshot`` fingerprints each RECORD without parsing it: a FIFO or a
    65 MiB one is a warning about its package. ``snapshot --patches`` parses
    them: one line naming the file, exit 2, nothing written. (In this process,
    as the command runs it: an exception that escaped fails the test.)"""
    venv, _, dist_info = installed
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    record = dist_info / "RECORD"
    for name, (content, expect) in hostile_records(b"../../../../").items():
        record.write_bytes(content)
        out = tmp_path / name / "patches"
        code = main(["snapshot", "--venv", str(venv), "--patches", str(out),
                     "-o", str(tmp_path / name / "snapshot.toml")])
        line = refused_line(code, capsys.readouterr().err)
        assert f"{record}: " in line and expect in line, (name, line)
        assert "--reinstall" in line, line
        assert not (tmp_path / name).exists()
    writer = _fifo_record(dist_info)
    try:
        fifo = main(["snapshot", "--venv", str(venv)]), capsys.readouterr()
    finally:
        writer.cancel()
    record.unlink()
    with record.open("wb") as fh:
        fh.truncate(65 << 20)
    huge = main(["snapshot", "--venv", str(venv)]), capsys.readouterr()
    for (code, said), expect in ((fifo, "not a regular file (a FIFO)"),
                                 (huge, "larger than 64 MiB")):
        assert code == 0, said.err[-2000:]
        assert said.err == (f"warning: {record}: {expect}; tinypkg 0.3.1 is "
                            "listed without its RECORD's fingerprint\n")
        assert 'name = "tinypkg"' in said.out


def test_the_cuda_finder_refuses_a_record_reaching_outside_the_venv(
        tmp_path: Path) -> None:
    """The real RECORD of nvidia-cuda-nvcc 13.0.88 is found; with a row naming a
    bin/nvcc outside the venv it is refused, naming the file and line
    (importlib.metadata took the folder above the venv as CUDA_HOME)."""
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    source = DATA / "cuda" / "wheel-toolkit" / "nvidia_cuda_nvcc-13.0.88.dist-info"
    shutil.copytree(source, site / source.name)
    assert find_wheel_toolkit([site]) is not None
    record = site / source.name / "RECORD"
    rows = record.read_bytes().count(b"\n")
    record.write_bytes(record.read_bytes()
                       + b"../../../../opt/evil/bin/nvcc,sha256=YWJj,3\n")
    with pytest.raises(RecordError) as caught:
        find_wheel_toolkit([site])
    assert caught.value.message == (
        f"{record}: line {rows + 1}: a path that leaves the venv: "
        "../../../../opt/evil/bin/nvcc")
