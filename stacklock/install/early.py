"""Install's head start: uv builds the new generation while stacklock loads.

A small install is mostly fixed cost: loading stacklock (the lock model,
packaging, the checks) takes as long as uv needs to link a warm stack into a new
venv. So ``stacklock install`` starts ``uv venv`` + ``uv pip sync`` into the next
generation as soon as it has read its command line, with the flags a lock of
wheels gets, and loads, reads the lock, plans and runs preflight while uv works.

What keeps this safe:

- the head start holds the venv's install lock from the start, and builds in a
  generation nobody sees: ``<venv>`` is only re-pointed after every check passed
  and uv succeeded;
- install adopts uv's run only when the plan's commands are exactly the ones
  started (interpreter, generation, flags, lock copy) and the lock needs no
  rewriting for uv (wheels from the artifact store, relative paths); otherwise uv
  is stopped, its generation removed, and the planned commands run as before;
- a failed check, an error or Ctrl-C stops uv (SIGTERM, then SIGKILL after 10 s)
  and removes the generation and its work folder. What uv already downloaded by
  then stays in uv's cache, content-addressed, for the next install.

Not used for a dry run or a pack. The install command starts it right after
parsing its arguments, before it imports the rest of install: this module and
:mod:`~stacklock.install.layout` import only the standard library and
stacklock's errors. On a warm install of a small lock (``pypi-small``) the head
start saves about 0.04-0.05 s of 0.25-0.30 s (``scripts/bench_install.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.bounded import shorten
from stacklock.errors import InstallError, LockError
from stacklock.install.layout import (
    VenvLayout,
    check_place,
    discard_generation,
    holds_lock,
    locked_state,
    new_generation,
    recover,
)
from stacklock.install.uvauth import lock_indexes, uv_credentials
from stacklock.install.uvsteps import (
    NO_CONFIG,
    UV_LOCK_NAME,
    uv_commands,
    uv_environment,
)
from stacklock.lockbytes import read_lock_bytes
from stacklock.uvbin import find_uv
from stacklock.uvoutput import lines_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import BinaryIO

    from stacklock.install.plan import InstallPlan
    from stacklock.runner import Runner

__all__ = [
    "NO_BUILD",
    "STEPS",
    "HeadStart",
    "find_base_python",
    "head_start",
    "log_namer",
]

STEPS = ("uv-venv", "uv-pip-sync")
NO_BUILD = ("--no-build",)  # a lock of wheels only (see plan.build_flags)
_ZIP_END = b"PK\x05\x06"  # a pack is a zip; a TOML lock never holds these bytes


def log_namer(cache: Path) -> Callable[[str], Path]:
    """``step -> <cache>/logs/<UTC time>-<pid>-<step>.log`` for one install."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
    return lambda step: cache / "logs" / f"{stamp}-{step}.log"


def find_base_python(request: str | None, *, uv: str, runner: Runner) -> str:
    """The interpreter a new venv is built from, found by uv's python discovery
    (``uv python find <request>``); when there is none, what uv said."""
    argv = [uv, "python", "find", "--no-project", NO_CONFIG,
            *([request] if request else [])]
    rc, out = runner.capture(argv, env=uv_environment(), stderr=True)
    lines = lines_of(out)  # bounded and decoded: what uv said may be anything
    path = next((line for line in reversed(lines) if line.startswith("/")), "")
    if rc != 0 or not path:
        said = shorten(lines[-1]) if lines else f"exit {rc}, no output"
        wanted = f" {shorten(request, 80)}" if request else ""
        raise InstallError(
            f"no python{wanted} found by `uv python find`: uv said: {said}",
            hint=f"pass --python /path/to/python{shorten(request or '', 80)} "
            f"or run `uv python install {shorten(request or '', 80)}`",
        )
    return path


class HeadStart:
    """``uv venv`` then ``uv pip sync`` of one generation: the first started by
    :meth:`start`, the second by a thread once the first succeeded.

    Mutable by nature (a running process), so a plain class; :func:`head_start`
    makes one and stops it unless install adopted it with :meth:`wait`.
    """

    def __init__(self, *, lock_path: Path, copied: bytes, layout: VenvLayout,
                 generation: int, python: str, commands: tuple[tuple[str, ...], ...],
                 log_for: Callable[[str], Path], notes: list[str],
                 env: Mapping[str, str] | None = None) -> None:
        self.lock_path = Path(os.path.abspath(lock_path))  # what uv's copy is of
        self._copied = copied  # the bytes uv installs
        self.layout = layout
        self.generation = generation
        self.python = python
        self.commands = commands
        self.log_for = log_for  # the whole install's logs share its names
        self.logs = {step: log_for(step) for step in STEPS}
        self.notes = notes  # what recovering the venv's folder did
        # uv's environment: the user's, less its UV_* settings
        # (stacklock.install.uvsteps), plus the index credentials
        # (stacklock.install.uvauth)
        self.env = {k: v for k, v in {**os.environ, **uv_environment(),
                                      **(env or {})}.items() if v is not None}
        self.adopted = False
        self._guard = threading.Lock()
        self._stopping = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._files: list[BinaryIO] = []
        self._results: list[tuple[str, int]] = []
        self._thread = threading.Thread(target=self._run, name="stacklock-uv",
                                        daemon=True)

    def start(self) -> None:
        """Start ``uv venv`` from this thread, then the thread that waits for it
        and starts ``uv pip sync``. That thread shares the interpreter with
        install's imports, and each of its system calls can wait a switch
        interval (5 ms) to get it back, so it gets no more than the waits, the
        second start and the lines around them: both logs are opened here."""
        first, second = (self.logs[step] for step in STEPS)
        first.parent.mkdir(parents=True, exist_ok=True)
        self._files = [first.open("ab", buffering=0), second.open("ab", buffering=0)]
        self._proc = self._spawn(0)
        self._thread.start()

    def _spawn(self, i: int) -> subprocess.Popen[bytes] | None:
        """Step ``i`` started, its command line first in its log; None when
        stopping or when it could not start (exit code 127)."""
        fh = self._files[i]
        fh.write(("$ " + " ".join(self.commands[i]) + "\n").encode("utf-8"))
        with self._guard:
            if self._stopping:
                return None
            try:
                self._proc = subprocess.Popen(
                    self.commands[i], stdout=fh, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env=self.env)
            except OSError as exc:
                fh.write(f"{exc}\n".encode())
                self._results.append((STEPS[i], 127))
                return None
            return self._proc

    def _run(self) -> None:
        proc = self._proc
        try:
            for i, step in enumerate(STEPS):
                if proc is None:
                    return
                rc = proc.wait()
                self._results.append((step, rc))
                proc = self._spawn(i + 1) if rc == 0 and i + 1 < len(STEPS) else None
                self._files[i].write(f"[exit {rc}]\n".encode())  # after the next start
                if rc != 0:
                    return
        finally:
            for fh in self._files:
                fh.close()

    @property
    def lock_bytes(self) -> bytes:
        """The lock's bytes as the head start read them (checked as install's
        own read checks them), which uv installs."""
        return self._copied

    def fits(self, plan: InstallPlan) -> bool:
        """Does ``plan`` run exactly what this head start runs, on a copy of the
        same lock file's same bytes (the plan was made from these)?"""
        return (plan.commands == self.commands
                and Path(os.path.abspath(plan.lock_path)) == self.lock_path
                and plan.lock_bytes == self._copied)

    def wait(self) -> list[tuple[str, int]]:
        """Adopt the run: wait for it to end; ``(step, exit code)`` of each step
        that ran (a failed step is the last)."""
        self._thread.join()
        self.adopted = True
        return list(self._results)

    def cancel(self) -> None:
        """Stop uv and remove the generation and its work folder, once: the
        generation number then belongs to the plan's own build."""
        with self._guard:
            if self._stopping:
                return
            self._stopping = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._thread.join()
        discard_generation(self.layout, self.generation)
        import shutil

        shutil.rmtree(self.layout.work_dir(self.generation), ignore_errors=True)


def _lock_bytes(path: Path) -> bytes | None:
    """The lock's bytes, read once and checked as install's own read checks
    them (:func:`~stacklock.lockbytes.read_lock_bytes`); None for what is not a
    lock file (not a regular file, too large, a pack: a zip's directory ends it).
    Install then reads it itself and says why."""
    try:
        content = read_lock_bytes(path)
    except LockError:  # install reads it itself and says why
        return None
    # the end record and its longest comment
    return None if _ZIP_END in content[-65_557:] else content


def _python_request(content: bytes) -> str | None:
    """The lock's ``[tool.stacklock.target] python``, else its requires-python,
    read from the TOML as written (as :func:`~stacklock.install.read.python_request`
    reads them from the lock model). Malformed (a ValueError) when not TOML."""
    from stacklock.bounded import parse_toml

    data = parse_toml(content)
    target: object = data
    for key in ("tool", "stacklock", "target"):
        target = target.get(key) if isinstance(target, dict) else None
    request = target.get("python") if isinstance(target, dict) else None
    request = request or data.get("requires-python")
    return request if isinstance(request, str) and request else None


@contextlib.contextmanager
def head_start(lock_path: Path, *, venv: Path, python: str | None,
               cache: Path) -> Iterator[HeadStart | None]:
    """A running :class:`HeadStart` for installing ``lock_path`` into ``venv``, or
    None when there is nothing safe to start (no readable lock, a pack, a lock
    whose python uv cannot find): install then reports the problem itself.
    Holds the venv's install lock until the block ends; stops uv on the way out
    unless install adopted it."""
    venv = Path(os.path.abspath(venv))
    copied = _lock_bytes(lock_path)
    try:
        check_place(venv, cache)
    except InstallError:
        copied = None
    if (copied is None or not venv.parent.is_dir()
            or (os.path.lexists(venv) and not venv.is_dir())):
        yield None  # install explains; a missing parent is made only once checked
        return
    layout = VenvLayout(venv=venv)
    try:
        installed = holds_lock(layout, copied)
    except OSError:
        installed = None
    if installed is not None:
        yield None  # most likely installed already: install says so
        return
    uv = find_uv()
    if python is None:
        from stacklock.runner import SubprocessRunner

        try:
            python = find_base_python(_python_request(copied), uv=uv,
                                      runner=SubprocessRunner())
        except (InstallError, ValueError, OSError):  # ValueError: TOML, UTF-8
            yield None
            return
    with locked_state(layout):
        notes = recover(layout)
        generation = new_generation(layout)
        uv_lock = layout.work_dir(generation) / UV_LOCK_NAME
        try:
            uv_lock.parent.mkdir(parents=True, exist_ok=True)
            uv_lock.write_bytes(copied)
            env = uv_credentials(lock_indexes(copied), uv_lock.parent)
        except OSError as exc:  # a full disk: leave nothing behind, say so
            discard_generation(layout, generation)
            shutil.rmtree(uv_lock.parent, ignore_errors=True)
            from stacklock.install.verify import out_of_space  # only on failure

            cause = out_of_space(layout.state_dir)
            if cause is not None:
                raise cause from exc
            raise
        log_for = log_namer(cache)
        head = HeadStart(
            lock_path=lock_path, copied=copied, layout=layout, generation=generation,
            python=python,
            commands=uv_commands(uv, python, layout.generation_dir(generation),
                                 uv_lock, NO_BUILD),
            log_for=log_for, notes=notes, env=env)
        head.start()
        try:
            yield head
        finally:
            if not head.adopted:
                head.cancel()
