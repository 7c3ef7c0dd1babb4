"""The oracle: is an installed intermediate environment good or bad?

Two kinds. :class:`CommandOracle` runs the user's command with the scratch venv
active (its ``bin`` first on ``PATH``, ``VIRTUAL_ENV`` set; a runfile toolkit's
``CUDA_HOME`` too), as ``git bisect run`` does: exit 0 good, 125 skip, anything
else bad; past the time limit the state is bad (a hang is a failure). However the
command ends, nothing it started outlives it: its process group is stopped, and
whatever left the group (``setsid``, a daemon) and was handed to stacklock as its
orphan (stacklock is the children's subreaper while an oracle runs, on Linux) is
stopped too, so no server or stray worker of one step answers the next step's
checks. With ``repeat`` > 1 every run must agree, else
the state is skipped as flaky. :class:`GateOracle` measures a number (the
validation gate's tokens per second) ``repeat`` times; :func:`classify` calls a
state good or bad only when its numbers sit clearly on one side of the ends'.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

__all__ = [
    "BAD",
    "GOOD",
    "SKIP",
    "CommandOracle",
    "GateOracle",
    "Oracle",
    "Verdict",
    "classify",
    "venv_env",
]

GOOD, BAD, SKIP = "good", "bad", "skip"
MEASURED = "measured"  # a gate's numbers, not yet classified against the ends
SKIP_CODE = 125  # git bisect run's "cannot test this one"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    state: str  # good | bad | skip | measured
    exit_code: int | None = None
    seconds: float = 0.0
    samples: tuple[float, ...] = ()
    note: str = ""


class Oracle(Protocol):
    def judge(self, venv: Path, env: Mapping[str, str], log: Path,
              lock: Path) -> Verdict:
        """Judge the environment in ``venv`` (installed from ``lock``)."""
        ...


def venv_env(venv: Path, cuda_home: str | None) -> dict[str, str]:
    """The environment of a command run "inside" ``venv``."""
    path = [str(venv / "bin")]
    env = {"VIRTUAL_ENV": str(venv)}
    if cuda_home:
        env["CUDA_HOME"] = cuda_home
        path.append(f"{cuda_home}/bin")
    env["PATH"] = os.pathsep.join([*path, os.environ.get("PATH", "")])
    env.pop("PYTHONHOME", None)
    return env


@dataclass(frozen=True, kw_only=True)
class CommandOracle:
    argv: tuple[str, ...]
    timeout: float | None = None
    repeat: int = 1

    def judge(self, venv: Path, env: Mapping[str, str], log: Path,
              lock: Path) -> Verdict:
        started = time.monotonic()
        codes: list[int | None] = []
        for _ in range(self.repeat):
            codes.append(_run(self.argv, env=env, log=log, timeout=self.timeout))
            if codes[-1] == SKIP_CODE:
                break
        seconds = time.monotonic() - started
        return _verdict(codes, seconds, self.timeout)


def _verdict(codes: Sequence[int | None], seconds: float,
             timeout: float | None) -> Verdict:
    first = codes[0]
    if SKIP_CODE in codes:
        return Verdict(state=SKIP, exit_code=SKIP_CODE, seconds=seconds,
                       note="the command exited 125 (cannot test)")
    if None in codes:
        return Verdict(state=BAD, exit_code=None, seconds=seconds,
                       note=f"stopped after the time limit of {timeout:g} s")
    if len(set(codes)) > 1 and 0 in codes:
        return Verdict(state=SKIP, exit_code=next(c for c in codes if c),
                       seconds=seconds,
                       note=f"flaky: exit codes {', '.join(map(str, codes))}")
    return Verdict(state=GOOD if first == 0 else BAD, exit_code=first,
                   seconds=seconds)


def _run(argv: Sequence[str], *, env: Mapping[str, str], log: Path,
         timeout: float | None) -> int | None:
    """Run ``argv`` in its own process group, output appended to ``log``; the
    exit code, None when the time limit stopped it, 127 when the program is
    missing. Whatever the end, what it started is stopped before this returns."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh, _Orphans() as orphans:
        fh.write(("$ " + " ".join(argv) + "\n").encode())
        fh.flush()
        try:
            proc = subprocess.Popen(list(argv), stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL,
                                    env={**os.environ, **env},
                                    start_new_session=True)
        except OSError as exc:
            fh.write(f"{exc}\n".encode())
            return 127
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:  # Ctrl-C too: the oracle goes with us
            left = orphans.stop(proc)
        if left:
            fh.write(f"[stopped {left} process(es) it left behind]\n".encode())
        fh.write(b"[stopped: time limit]\n" if code is None
                 else f"[exit {code}]\n".encode())
        return code


_PR_SET_CHILD_SUBREAPER = 36
_GRACE = 5.0  # seconds between SIGTERM and SIGKILL


class _Orphans:
    """What an oracle started, stopped with it. Its process group outlives the
    command while a member lives (a ``server &`` of a shell that exited). And
    while an oracle runs, stacklock is its descendants' subreaper (Linux's
    ``prctl(PR_SET_CHILD_SUBREAPER)``): a process that left the group
    (``setsid``, a daemon) and lost its parent becomes stacklock's child instead
    of init's, so it can be found and stopped too (and the children of those
    stopped, as they are handed up). Elsewhere only the group is stopped."""

    def __enter__(self) -> _Orphans:
        self._before = _children()
        self._reaper = _subreaper(True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._reaper:
            _subreaper(False)

    def _new(self) -> set[int]:
        """This process's children that the oracle left it (reaped if ended)."""
        if not self._reaper:
            return set()
        alive = set()
        for pid in _children() - self._before:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    continue  # ended: reaped now
            alive.add(pid)
        return alive

    def stop(self, proc: subprocess.Popen[bytes]) -> int:
        """SIGTERM to the command's group and to the orphans it left, SIGKILL to
        what is still there after a grace; how many processes besides the command
        itself were running when it ended."""
        proc.poll()
        seen: set[int] = set()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            found = self._signal(proc, sig)
            seen |= found
            deadline = time.monotonic() + _GRACE
            while found and time.monotonic() < deadline:
                time.sleep(0.02)
                proc.poll()
                found = self._signal(proc, 0)
            if not found:
                break
        for _ in range(100):  # the children of those stopped are handed up too
            left = self._new()
            if not left:
                break
            seen |= left
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_GRACE)
        return len(seen - {proc.pid})

    def _signal(self, proc: subprocess.Popen[bytes], sig: int) -> set[int]:
        """Send ``sig`` to the group and the orphans; the pids that took it (the
        group by its leader's pid)."""
        took = set()
        try:
            os.killpg(proc.pid, sig)
            if proc.returncode is None or _group_has_others(proc.pid):
                took.add(proc.pid)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in self._new():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                took.add(pid)
        return took


def _group_has_others(pgid: int) -> bool:
    """Whether a process other than a zombie is in the process group."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat(entry.name)
        if fields and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _stat(pid: str) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None  # ended meanwhile, or no /proc


def _subreaper(on: bool) -> bool:
    """Set (or clear) this process as its descendants' subreaper; whether it
    could (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _children() -> set[int]:
    """The pids of this process's children (from each process's ``stat``:
    ``/proc/PID/task/*/children`` is not in every kernel); none without /proc."""
    me = os.getpid()
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return set()
    return {int(name) for name in entries
            if (fields := _stat(name)) and len(fields) > 1 and int(fields[1]) == me}


@dataclass(frozen=True, kw_only=True)
class GateOracle:
    """``measure(venv, lock, log, env)`` gives one number (higher is better),
    taken ``repeat`` times, its server run in ``env`` (the step's own caches and
    temporary files); a measurement that cannot run skips the state."""

    measure: Callable[[Path, Path, Path, Mapping[str, str]], float]
    repeat: int = 3

    def judge(self, venv: Path, env: Mapping[str, str], log: Path,
              lock: Path) -> Verdict:
        started = time.monotonic()
        samples = []
        try:
            for _ in range(self.repeat):
                samples.append(self.measure(venv, lock, log, env))
        except StacklockError as exc:
            return Verdict(state=SKIP, seconds=time.monotonic() - started,
                           samples=tuple(samples), note=f"gate could not run: {exc}")
        return Verdict(state=MEASURED, seconds=time.monotonic() - started,
                       samples=tuple(samples))


def classify(samples: Sequence[float], good: Sequence[float],
             bad: Sequence[float]) -> str | None:
    """GOOD or BAD when the samples' median lies on that end's side of the
    midpoint between the ends' medians, farther from it than the ends' noise
    (their largest standard deviation, and at least a tenth of the gap), and
    two thirds of the samples agree: one sample slowed by a busy machine does
    not decide. None when unclear."""
    if not samples:
        return None
    g, b = statistics.median(good), statistics.median(bad)
    mid = (g + b) / 2
    margin = max(_stdev(good), _stdev(bad), abs(g - b) / 10)
    sign = 1.0 if g > b else -1.0
    offsets = [sign * (s - mid) for s in samples]
    centre = statistics.median(offsets)
    agree = sum((o > 0) == (centre > 0) for o in offsets)
    if abs(centre) <= margin or 3 * agree < 2 * len(offsets):
        return None
    return GOOD if centre > 0 else BAD


def separated(good: Sequence[float], bad: Sequence[float]) -> bool:
    """The ends are told apart: their ranges do not overlap."""
    return max(good) < min(bad) or max(bad) < min(good)


def _stdev(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0
