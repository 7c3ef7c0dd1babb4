"""The oracle: is an installed intermediate environment good or bad?

Two kinds. :class:`CommandOracle` runs the user's command with the scratch venv
active (its ``bin`` first on ``PATH``, ``VIRTUAL_ENV`` set; a runfile toolkit's
``CUDA_HOME`` too), as ``git bisect run`` does: exit 0 good, 125 skip, anything
else bad; past the time limit the whole process group is stopped and the state
is bad (a hang is a failure). With ``repeat`` > 1 every run must agree, else
the state is skipped as flaky. :class:`GateOracle` measures a number (the
validation gate's tokens per second) ``repeat`` times; :func:`classify` calls a
state good or bad only when its numbers sit clearly on one side of the ends'.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
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
    exit code, None when the time limit stopped it (with its children), 127
    when the program is missing."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
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
            _stop(proc)
            fh.write(b"[stopped: time limit]\n")
            return None
        except BaseException:  # Ctrl-C: the oracle goes with us
            _stop(proc)
            raise
        fh.write(f"[exit {code}]\n".encode())
        return code


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue


@dataclass(frozen=True, kw_only=True)
class GateOracle:
    """``measure(venv, lock, log)`` gives one number (higher is better), taken
    ``repeat`` times; a measurement that cannot run skips the state."""

    measure: Callable[[Path, Path, Path], float]
    repeat: int = 3

    def judge(self, venv: Path, env: Mapping[str, str], log: Path,
              lock: Path) -> Verdict:
        started = time.monotonic()
        samples = []
        try:
            for _ in range(self.repeat):
                samples.append(self.measure(venv, lock, log))
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
