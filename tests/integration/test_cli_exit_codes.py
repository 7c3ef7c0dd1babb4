"""The README's exit-code table, held by running the ``stacklock`` command as a
user does (a subprocess): 0 ok, 1 the answer is "no", 2 bad input, 3 an index
or host that does not answer (every dead index named, one line each), 130
interrupted; and how much each verbosity prints.

The dead indexes are real sockets on 127.0.0.1: a port nothing listens on (the
connection is refused) and a server that accepts and never answers. The
resolution that prints is the recorded real one of tests/data/resolve (its
cassette fills the cache, the command then runs with --offline)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stacklock.cli.parser import build_parser
from tests.helpers.jsonout import parse_output
from tests.helpers.resolved import RESOLVE as DATA
from tests.helpers.resolved import fill_cache

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
# each exit code of the README's table, and the test here that produces it
COVERED = {0: "test_quiet_default_and_verbose_line_counts",
           1: "test_a_check_that_fails_exits_1",
           2: "test_a_typo_in_a_profile_exits_2_in_one_line",
           3: "test_every_dead_index_is_named_and_exits_3",
           4: "test_update_exits_4_when_it_wrote_a_new_lock_then_0",
           130: "test_sigint_exits_130_without_a_traceback",
           129: "test_sigterm_and_sighup_end_as_ctrl_c_does",
           143: "test_sigterm_and_sighup_end_as_ctrl_c_does"}


def _stacklock(*argv: str, cwd: Path, cache: Path,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "stacklock", *argv], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


class Silent:
    """A server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/simple"
        self.accepted = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


def _refused_url() -> str:
    """A loopback URL whose port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/simple"


def _profile(path: Path, indexes: dict[str, str]) -> Path:
    text = "".join(f'[[index]]\nname = "{name}"\nurl = "{url}"\n'
                   for name, url in indexes.items())
    path.write_text(text + '[requirements]\npackages = ["six", "idna"]\n')
    return path


def test_update_exits_4_when_it_wrote_a_new_lock_then_0(tmp_path: Path,
                                                       local_index: str) -> None:
    """``update`` on recorded wheels served as a find-links page: a lock it
    wrote is 4, the same lock again is 0 with nothing written."""
    wheels = f"{local_index}/install/wheels/"
    profile = tmp_path / "small.toml"
    profile.write_text(f'[[index]]\nname = "local"\nurl = "{wheels}"\nkind = "flat"\n'
                       '[requirements]\npackages = ["six"]\n')
    argv = ("update", str(profile), "-o", "pylock.toml", "--summary", "s.md")
    first = _stacklock(*argv, cwd=tmp_path, cache=tmp_path / "cache")
    assert first.returncode == 4, first.stderr
    assert (tmp_path / "s.md").is_file()
    (tmp_path / "s.md").unlink()
    again = _stacklock(*argv, cwd=tmp_path, cache=tmp_path / "cache")
    assert again.returncode == 0, again.stderr
    assert not (tmp_path / "s.md").exists()


def test_the_readme_table_is_what_these_tests_hold() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert codes == set(COVERED)
    assert all(callable(globals()[name]) for name in COVERED.values())
    shown = build_parser().format_help().split("exit codes:\n", 1)[1]
    assert {int(m) for m in re.findall(r"^  (\d+) ", shown, re.M)} == codes


def test_a_typo_in_a_profile_exits_2_in_one_line(tmp_path: Path) -> None:
    profile = tmp_path / "typo.toml"
    profile.write_text('[requirement]\npackages = ["six"]\n')
    done = _stacklock("resolve", str(profile), cwd=tmp_path, cache=tmp_path / "c")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert str(profile) in done.stderr and "requirement" in done.stderr
    assert not (tmp_path / "locks").exists()


@pytest.mark.parametrize("verb", ["resolve", "update"])
def test_every_dead_index_is_named_and_exits_3(tmp_path: Path, silent: Silent,
                                               verb: str) -> None:
    """Two refusing ports and one server that never answers: all three named,
    one line each, the silent one within the request deadline (--timeout 2)
    rather than after three 30 s attempts; update as resolve."""
    dead = {"dead-a": _refused_url(), "silent": silent.url,
            "dead-b": _refused_url()}
    profile = _profile(tmp_path / "dead.toml", dead)
    done = _stacklock(verb, str(profile), "--timeout", "2", cwd=tmp_path,
                      cache=tmp_path / "c", timeout=60)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "stacklock: error: 3 indexes did not answer:"
    named = [re.match(r"  index '([a-z-]+)' \((\S+)\)", line) for line in lines[1:]]
    assert {(m.group(1), m.group(2).rsplit("/", 2)[0]) for m in named if m} == \
        set(dead.items())
    silent_line = next(line for line in lines if "'silent'" in line)
    assert "timed out" in silent_line and "within the 2 s allowed" in silent_line
    assert "Connection refused" in lines[1]
    assert "Traceback" not in done.stderr and not (tmp_path / "locks").exists()


def test_a_check_that_fails_exits_1(tmp_path: Path) -> None:
    old, new = (str(ROOT / "locks" / f"pylock.{name}.toml")
                for name in ("blackwell-cu128", "pypi-cu130"))
    done = _stacklock("diff", old, new, "--exit-code", "-q", cwd=tmp_path,
                      cache=tmp_path / "c")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "")
    same = _stacklock("diff", old, old, "--exit-code", "--json", cwd=tmp_path,
                      cache=tmp_path / "c")
    assert same.returncode == 0 and '"packages": []' in same.stdout


def test_quiet_default_and_verbose_line_counts(tmp_path: Path) -> None:
    """A resolve prints one line a phase; -v every line (each override); -q
    nothing. The first run resolves, the later ones replay its record: both
    are cut the same way."""
    cache = tmp_path / "cache"
    fill_cache("override", cache)
    case = str(DATA / "cases" / "override.toml")
    argv = ("resolve", case, "-o", str(tmp_path / "out.toml"), "--offline",
            "--no-check")
    loud = _stacklock(*argv, "-v", cwd=tmp_path, cache=cache)
    assert loud.returncode == 0, loud.stderr
    overrides = [line for line in loud.stdout.splitlines() if "override:" in line]
    assert overrides and len(loud.stdout.splitlines()) == 1 + len(overrides)
    plain = _stacklock(*argv, cwd=tmp_path, cache=cache)
    assert plain.returncode == 0 and plain.stderr == ""
    [line] = plain.stdout.splitlines()
    assert line.startswith("locked ") and \
        line.endswith(f"; {len(overrides)} overrides (-v shows them)")
    quiet = _stacklock(*argv, "-q", cwd=tmp_path, cache=cache)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    again = _stacklock(*argv, "-v", cwd=tmp_path, cache=cache)
    assert again.stdout.splitlines()[1:] == loud.stdout.splitlines()[1:]


def test_sigint_exits_130_without_a_traceback(tmp_path: Path,
                                              silent: Silent) -> None:
    """Ctrl-C while a request waits on a server, sent as a terminal sends it (to
    the shell and the command): one line, nothing written, and the command ends
    by SIGINT at once (the worker threads still waiting are not joined). A shell
    reads that as 130, and bash, seeing its child killed by the interrupt, stops
    too: a loop around the command ends. A command that exited 130 on its own
    would leave the shell going ("went on 130")."""
    profile = _profile(tmp_path / "wait.toml", {"silent": silent.url})
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "c")}
    with subprocess.Popen(
            ["bash", "-c", '"$@"; echo "went on $?"', "bash", sys.executable, "-m",
             "stacklock", "resolve", str(profile)],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,  # its own group, as a terminal's
            # a shell may have started the tests with SIGINT ignored
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as shell:
        assert silent.accepted.wait(60), "stacklock never asked the index"
        os.killpg(shell.pid, signal.SIGINT)
        out, err = shell.communicate(timeout=60)
    assert shell.returncode == -signal.SIGINT and out == ""
    assert err == "stacklock: interrupted; nothing was half-written\n"
    assert not (tmp_path / "locks").exists()


@pytest.mark.parametrize(("signo", "said"), [(signal.SIGTERM, "terminated (SIGTERM)"),
                                             (signal.SIGHUP, "hung up (SIGHUP)")])
def test_sigterm_and_sighup_end_as_ctrl_c_does(signo: int, said: str, tmp_path: Path,
                                               silent: Silent) -> None:
    """A CI job cancelled (SIGTERM) or a terminal closed (SIGHUP) while a request
    waits, sent to stacklock alone: one line, nothing written, and the command
    ends by that signal (a shell shows 143 or 129); with --json the error
    document says which signal. (An install stopped so: test_install_stopped.)"""
    profile = _profile(tmp_path / "wait.toml", {"silent": silent.url})
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "c")}
    with subprocess.Popen(
            [sys.executable, "-m", "stacklock", "resolve", str(profile), "--json"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, preexec_fn=lambda: signal.signal(signo, signal.SIG_DFL)
            ) as proc:
        assert silent.accepted.wait(60), "stacklock never asked the index"
        proc.send_signal(signo)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signo
    assert err == f"stacklock: {said}; nothing was half-written\n"
    error = parse_output(out, "error")
    assert error["exit_code"] == 128 + signo
    assert error["error"]["signal"] == signal.Signals(signo).name
    assert not (tmp_path / "locks").exists()
