"""An install stopped by SIGTERM (a cancelled CI job, ``timeout``) or SIGHUP (a
closed terminal), sent to the stacklock process alone while uv downloads into
the new generation: it ends as Ctrl-C does. uv is stopped, the new generation
and its work folder are removed, the old venv stays current and works, one line
says so, and the process ends by that signal (a shell shows 128 + its number)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomlkit

from stacklock.install.run import install_lock
from tests.helpers.install_server import Served, local_lock

PY = sys.executable


def _without(lock: Path, name: str, dest: Path) -> Path:
    data = tomlkit.parse(lock.read_text("utf-8"))
    packages = data["packages"]
    kept = [p for p in packages if p["name"] != name]  # type: ignore[union-attr]
    data["packages"] = kept
    dest.write_text(tomlkit.dumps(data), "utf-8")
    return dest


def _processes_naming(path: Path) -> list[str]:
    """The command lines of running processes that name ``path`` (uv building
    in it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv)
        if str(path) in line:
            found.append(line)
    return found


@pytest.mark.parametrize(("signo", "said"), [
    (signal.SIGTERM, "terminated (SIGTERM)"),
    (signal.SIGHUP, "hung up (SIGHUP)"),
])
def test_a_stop_signal_mid_download_leaves_the_old_venv_and_nothing_else(
        signo: int, said: str, server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    full = local_lock(base, served, tmp_path / "pylock.small.toml")
    venv = tmp_path / "env"
    install_lock(full, venv=venv, python=PY, validate=False, cache=tmp_path / "c1")
    state = venv.parent / "env.stacklock"
    before = sorted(p.name for p in state.iterdir())
    # the second lock needs a new generation; a cold uv cache downloads slowly
    second = _without(full, "iniconfig", tmp_path / "pylock.second.toml")
    for name in served.files:
        served.delay[name] = 0.05
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "c2"),
           "UV_CACHE_DIR": str(tmp_path / "uv2")}
    with subprocess.Popen(
            [PY, "-m", "stacklock", "install", str(second), "--venv", str(venv),
             "--python", PY, "--no-validate"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # the stop signal is not ignored, whatever started the tests
            preexec_fn=lambda: signal.signal(signo, signal.SIG_DFL)) as proc:
        assert served.started.wait(60), "uv never started downloading"
        # install has planned and snapshotted generation 1 (what it replaces)
        snapshot = state / "pylock.snapshot-1.toml"
        deadline = time.monotonic() + 60
        while not snapshot.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert snapshot.exists() and _processes_naming(state / "2"), \
            "uv is not building generation 2"
        proc.send_signal(signo)  # to stacklock alone: uv is not told by anyone else
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signo  # ended by the signal itself: 128 + signo
    assert (out, err) == ("", f"stacklock: {said}; nothing was half-written\n")
    deadline = time.monotonic() + 10
    while _processes_naming(state) and time.monotonic() < deadline:
        time.sleep(0.1)  # uv was told to stop; the kernel may take a moment
    assert _processes_naming(state) == []
    # no 2, no work-2, no snapshot of what it was to replace
    assert sorted(p.name for p in state.iterdir()) == before
    assert os.readlink(venv) == "env.stacklock/1"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import iniconfig"],
                          capture_output=True, check=False)
    assert done.returncode == 0  # the old generation, whole
    [log] = (tmp_path / "c2" / "logs").glob("*-uv-pip-sync.log")
    stopped = log.read_text("utf-8").rstrip().rsplit("\n", 1)[-1]
    assert stopped in ("[exit -15]", "[exit -9]"), stopped  # uv was stopped
