"""uv's output, read one bounded way (stacklock.uvoutput): real uv's answers as
stacklock reads them, and a hostile stand-in for uv (a script printing tens of
megabytes of binary junk, terminal escapes, NUL bytes and JSON nested 100,000
deep on both streams, then failing) in every place stacklock reads what uv
says: ``uv python find`` (install, without --python and through the command),
``uv pip check`` (validate), a failed ``uv venv``'s log (install with --python)
and the pack bootstrap's own uv. Each is one short line, never a traceback (the
junk was a UnicodeDecodeError) or all of it in memory."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from stacklock.errors import InstallError, PackError
from stacklock.install.early import find_base_python
from stacklock.lock import load_lock
from stacklock.runner import SubprocessRunner, find_uv
from stacklock.uvoutput import (
    MAX_KEPT,
    MAX_LINE,
    capture,
    lines_of,
    read_log,
    text_of,
)
from stacklock.validate.checks import check_uv_pip_check, parse_uv_pip_check
from tests.helpers.data import ROOT
from tests.helpers.hostile import hostile_env, refused
from tests.helpers.wheelkit import build_wheel, make_venv, uv_install, write_lock

JUNK = 20 << 20  # bytes of random junk on each stream
HOSTILE_UV = f"""#!/bin/sh
# a hostile stand-in for uv: binary junk, escapes, NUL, deep JSON; then exit 2
head -c {JUNK} /dev/urandom
printf '\\033[2J\\033]0;title\\007\\000\\a\\r'
yes '[' | head -n 100000 | tr -d '\\n'
head -c {JUNK} /dev/urandom >&2
printf '\\nerror: \\000the last \\033[31mline\\033[0m\\n' >&2
exit 2
"""


@pytest.fixture
def hostile_uv(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "uv"
    path.parent.mkdir()
    path.write_text(HOSTILE_UV)
    path.chmod(0o755)
    return path


def _printable(text: str) -> bool:
    return not any((c < " " and c not in "\t\n") or c == "\x7f" for c in text)


def test_capture_keeps_the_head_and_tail_of_megabytes(hostile_uv: Path) -> None:
    said = capture([str(hostile_uv)])
    assert said.rc == 2 and not said.timed_out
    for stream in (said.stdout, said.stderr):
        assert len(stream.encode()) < 4 * MAX_KEPT  # replacements are 3 bytes
        assert "bytes not kept ...]" in stream and _printable(stream)
    assert said.dropped > 2 * JUNK - 2 * MAX_KEPT
    assert lines_of(said.stderr)[-1] == "error: the last line"
    assert all(len(line) <= MAX_LINE + 30 for line in lines_of(said.stdout))


def test_an_escape_sequence_never_reaches_past_its_line() -> None:
    """An OSC left open (random bytes hold ESC ]) or an ESC at a line's end
    takes nothing of the next line; colours and NUL are dropped."""
    text = text_of(b"a\x1b]0;junk\nerror: the \x1b[31mlast\x1b[0m li\x00ne\x1b\r"
                   b"x\x1b")
    assert text == "a\nerror: the last line\nx"


def test_capture_says_a_missing_program_or_one_past_its_time(tmp_path: Path) -> None:
    assert capture([str(tmp_path / "no-such-uv")]).rc == 127
    slow = capture(["sleep", "30"], timeout=0.5)
    assert (slow.rc, slow.timed_out) == (127, True)


def test_real_uv_is_read_as_it_speaks(tmp_path: Path) -> None:
    """``uv python find`` names this interpreter; ``uv pip check`` of a venv
    uv made, with one conflict: the conflict, nothing else."""
    found = find_base_python(sys.executable, uv=find_uv(), runner=SubprocessRunner())
    assert os.path.samefile(found, sys.executable)
    app = build_wheel(tmp_path / "w", "app", "1.0", {"app/__init__.py": b""},
                      requires=("helper>=2",))
    helper = build_wheel(tmp_path / "w", "helper", "1.0", {"helper/__init__.py": b""})
    python = make_venv(tmp_path / "venv")
    uv_install(python, app, helper)
    result = check_uv_pip_check(None, python)
    assert result.status == "fail", result.reason
    assert result.reason == "1 unexplained: app requires helper>=2, 1.0 installed"
    said = capture([find_uv(), "pip", "check", "--python", str(python)])
    assert parse_uv_pip_check(said.stdout + said.stderr)[1] == []


def test_a_hostile_uv_python_find_is_one_line(hostile_uv: Path) -> None:
    with pytest.raises(InstallError) as caught:
        find_base_python("3.12", uv=str(hostile_uv), runner=SubprocessRunner())
    line = str(caught.value)
    assert line.startswith("no python 3.12 found by `uv python find`: uv said: "
                           "error: the last line")
    assert len(line) < 1000 and _printable(line)


def test_a_hostile_uv_pip_check_fails_the_check_in_a_line(
        hostile_uv: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    result = check_uv_pip_check(None, python, uv=str(hostile_uv))
    assert result.status == "fail"
    assert result.reason == "uv pip check exited 2: error: the last line"


def test_the_pack_bootstraps_uv_failing_is_one_line(hostile_uv: Path) -> None:
    from stacklock.pack.boot import _run

    with pytest.raises(PackError) as caught:
        _run([str(hostile_uv), "venv"], dict(os.environ), "uv venv (the bootstrap)")
    assert caught.value.message == ("uv venv (the bootstrap) failed (exit 2): "
                                    "error: the last line")


def test_a_log_is_read_from_its_end(tmp_path: Path) -> None:
    log = tmp_path / "uv-pip-sync.log"
    log.write_bytes(b"$ uv pip sync\n" + os.urandom(3 << 20) + b"\nlast\n")
    text = read_log(log, limit=1 << 20)
    assert text.endswith("\nlast\n") and len(text.encode()) < 4 << 20
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="FIFO"):
        read_log(tmp_path / "fifo")


# -- the command, with the hostile uv where stacklock looks for its own ------------


def _stacklock_with(uv: Path, tmp_path: Path) -> list[str]:
    """A python whose prefix's bin/uv is ``uv`` (where stacklock finds the uv
    it ships with), running this checkout's stacklock."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)],
                   check=True)
    (env / "bin" / "uv").symlink_to(uv)
    return [str(env / "bin" / "python"), "-m", "stacklock.cli"]


def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = hostile_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])
    return env


def test_install_with_a_hostile_uv_is_one_line(hostile_uv: Path,
                                               tmp_path: Path) -> None:
    """Without --python, ``uv python find`` (a UnicodeDecodeError traceback
    before); with it, the failed ``uv venv``, its 40 MB log read from its end."""
    wheel = build_wheel(tmp_path / "w", "alpha", "1.0", {"alpha.py": b""})
    lock = write_lock(tmp_path / "pylock.toml", [wheel])
    assert load_lock(lock).packages
    command = _stacklock_with(hostile_uv, tmp_path)
    env = _cli_env(tmp_path)
    venv = tmp_path / "venv"
    found = subprocess.run([*command, "install", str(lock), "--venv", str(venv)],
                           capture_output=True, text=True, env=env, timeout=300,
                           check=False)
    line = refused(found, "found by `uv python find`: uv said: error: the last line")
    assert _printable(line)
    built = subprocess.run([*command, "install", str(lock), "--venv", str(venv),
                            "--python", sys.executable], capture_output=True,
                           text=True, env=env, timeout=300, check=False)
    refused(built, "uv-venv failed with exit code 2", "was not changed")
    assert not venv.exists()
