"""Where install keeps a venv's generations, and the moves between them.

Layout (``VenvLayout``)::

    <venv>                      symlink -> <venv>.stacklock/<n>
    <venv>.stacklock/<n>/       one generation, built in place by uv (never moved)
    <venv>.stacklock/<n>.ok     written once generation n is complete
    <venv>.stacklock/work-<n>/  the pylock copy uv installs from, wheel links
    <venv>.stacklock/pylock.snapshot-<n>.toml   what generation n held when replaced
    <venv>.stacklock/journal.json               only while a plain venv is adopted

A new generation is only linked after ``uv pip sync`` succeeded, so a failure or a
SIGKILL while uv runs leaves ``<venv>`` untouched; leftovers are removed by the next
run. The one non-atomic step, adopting a plain (pre-stacklock) venv directory, is
journaled and completed or undone by :func:`recover`.

Install's head start (:mod:`~stacklock.install.early`) uses this module before
the rest of install is imported, so it imports what only some moves need (json,
shutil) inside the functions that make them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.errors import InstallError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "VenvLayout",
    "check_place",
    "current_generation",
    "discard_generation",
    "holds_lock",
    "locked_state",
    "new_generation",
    "next_generation",
    "prune",
    "recover",
    "refuse_running_environment",
    "rollback",
    "swap_in",
]


class VenvLayout:
    """``<venv>`` is a symlink to ``<venv>.stacklock/<n>``; the folder holds history.

    uv venvs embed their absolute path (activate scripts, shebangs), so they cannot
    be moved; each generation is built at its final place and only the symlink is
    swapped (``os.replace``, atomic).

    A value like a frozen dataclass, written out because ``dataclasses`` loads
    ``inspect`` (~9 ms) before uv can start.
    """

    __slots__ = ("venv",)
    venv: Path

    def __init__(self, *, venv: Path) -> None:
        object.__setattr__(self, "venv", venv)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"VenvLayout is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VenvLayout) and other.venv == self.venv

    def __hash__(self) -> int:
        return hash(self.venv)

    def __repr__(self) -> str:
        return f"VenvLayout(venv={self.venv!r})"

    @property
    def state_dir(self) -> Path:
        return self.venv.parent / f"{self.venv.name}.stacklock"

    def generation_dir(self, n: int) -> Path:
        return self.state_dir / str(n)

    def snapshot_path(self, n: int) -> Path:
        return self.state_dir / f"pylock.snapshot-{n}.toml"

    def work_dir(self, n: int) -> Path:
        return self.state_dir / f"work-{n}"

    @property
    def journal(self) -> Path:
        return self.state_dir / "journal.json"


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def refuse_running_environment(layout: VenvLayout, *,
                               prefix: str | None = None) -> None:
    """Refuse to install into the environment this stacklock runs from
    (``sys.prefix``, or ``prefix``): ``<venv>`` is it, holds it (it is one of
    ``<venv>``'s generations, through the symlink or not), or lies inside it.
    Swapping it would pull the running command's own files from under it (and
    ``stacklock`` with them); pruning could delete them. Called before anything
    is made, the head start included."""
    import sys

    running = os.path.realpath(prefix or sys.prefix)
    venv = os.path.abspath(layout.venv)
    targets = {venv, os.path.realpath(venv), os.path.realpath(layout.state_dir)}
    inside = any(_within(running, t) for t in targets)
    # a venv inside the running one (the interpreter itself, not a venv, is a
    # system prefix such as /usr: a venv below it is no threat to it)
    below = os.path.isfile(os.path.join(running, "pyvenv.cfg")) and any(
        _within(t, running) for t in (venv, os.path.realpath(venv)))
    if inside or below:
        where = ("stacklock runs from this environment" if inside else
                 "it lies inside the environment stacklock runs from")
        harm = ("would replace the running command's own files" if inside else
                "would write into the running command's own environment")
        raise InstallError(
            f"--venv {layout.venv}: {where} ({running}); installing there {harm}",
            hint="pass --venv another path (e.g. --venv /opt/ml-env), or run "
            "stacklock from another environment (pipx or uv tool install)")


_STATE = ".stacklock"


def check_place(venv: Path, cache: Path) -> None:
    """Refuse a ``venv`` (absolute) that lives where stacklock removes things:
    inside its cache (the artifact store drops what no longer matches its sha256,
    old logs and pages go), or inside another venv's state folder (one of its
    generations, reached through its symlink or not, or their work folders),
    which that venv's pruning and rollbacks remove."""
    real = Path(os.path.realpath(venv.parent)) / venv.name
    home = Path(os.path.realpath(cache))
    if real == home or home in real.parents:
        raise InstallError(f"{venv}: inside stacklock's cache ({cache}), whose "
                           "files are removed when they no longer match or age",
                           hint="pass --venv a path outside the cache")
    for parent in real.parents:
        if parent.name.endswith(_STATE) and _is_state_dir(parent):
            other = parent.parent / parent.name.removesuffix(_STATE)
            raise InstallError(
                f"{venv}: inside {parent}, where stacklock keeps the generations "
                f"of the venv {other}; its pruning and rollbacks remove them",
                hint="pass --venv a path of its own, beside that venv")


def _is_state_dir(folder: Path) -> bool:
    """A ``<venv>.stacklock`` folder stacklock made: it holds a generation."""
    try:
        return any(p.name.isdigit() or p.name.endswith(".ok")
                   or p.name.startswith("work-") for p in folder.iterdir())
    except OSError:
        return False


def current_generation(layout: VenvLayout) -> int | None:
    """The generation ``<venv>`` points at, None for a plain directory or nothing."""
    venv = layout.venv
    if not venv.is_symlink():
        return None
    target = Path(os.readlink(venv))
    if target.parent.name == layout.state_dir.name and target.name.isdigit():
        return int(target.name)
    return None


def _generations(layout: VenvLayout) -> list[int]:
    if not layout.state_dir.is_dir():
        return []
    return sorted(int(p.name) for p in layout.state_dir.iterdir() if p.name.isdigit())


def _complete(layout: VenvLayout, n: int) -> bool:
    return (layout.state_dir / f"{n}.ok").is_file()


def holds_lock(layout: VenvLayout, data: bytes) -> int | None:
    """The current generation when it is complete and was installed from a lock
    of exactly these bytes (its copy beside it), else None."""
    n = current_generation(layout)
    if n is None or not _complete(layout, n):
        return None
    try:
        copy = (layout.state_dir / f"pylock.generation-{n}.toml").read_bytes()
    except OSError:
        return None
    return n if copy == data else None


def next_generation(layout: VenvLayout) -> int:
    return max(_generations(layout), default=0) + 1


def _own_current(layout: VenvLayout) -> int | None:
    """:func:`current_generation`, refusing a ``<venv>`` symlink stacklock did
    not make (it is never replaced)."""
    current = current_generation(layout)
    if layout.venv.is_symlink() and current is None:
        raise InstallError(
            f"{layout.venv} is a symlink stacklock did not make",
            hint="remove it or install to another --venv",
        )
    return current


def new_generation(layout: VenvLayout) -> int:
    """The number the next install builds: after every generation on disk, and
    after the number a plain venv at ``<venv>`` gets when it is adopted."""
    current = _own_current(layout)
    plain = layout.venv.exists() and current is None
    return next_generation(layout) + (1 if plain else 0)


@contextlib.contextmanager
def locked_state(layout: VenvLayout) -> Iterator[None]:
    """One install/rollback per venv at a time, across processes.

    The lock is an flock on the state folder itself, so no lock file is left
    behind; a folder this call made and that is still empty at the end (a first
    install that failed, a refused rollback) is removed again."""
    made = not layout.state_dir.exists()
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(layout.state_dir, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:  # removed by a run that just ended on it
        raise InstallError(f"{layout.venv}: another stacklock install ran on it "
                           "just now", hint="run the command again") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise InstallError(
                f"{layout.venv}: another stacklock install is running on it",
                hint="wait for it to finish",
            ) from exc
        try:
            yield
        finally:
            if made:
                with contextlib.suppress(OSError):  # not empty: something was made
                    layout.state_dir.rmdir()
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def recover(layout: VenvLayout) -> list[str]:
    """Finish or undo what an interrupted run left; returns what it did."""
    done: list[str] = []
    if layout.journal.is_file():
        from stacklock.bounded import parse_json

        entry = parse_json(layout.journal.read_bytes())
        moved = Path(entry["moved_to"])
        if not os.path.lexists(layout.venv) and moved.is_dir():
            os.rename(moved, layout.venv)
            done.append(f"restored {layout.venv} from an interrupted swap")
        layout.journal.unlink()
    current = current_generation(layout)
    for n in _generations(layout):
        if n != current and not _complete(layout, n):
            _remove_tree(layout.generation_dir(n))
            done.append(f"removed unfinished generation {n}")
    if layout.state_dir.is_dir():
        for name in os.listdir(layout.state_dir):
            if name.startswith("work-"):
                _remove_tree(layout.state_dir / name)
    return done


def _remove_tree(path: Path) -> None:
    """``shutil.rmtree``, ignoring errors; shutil loaded only when there is
    something to remove."""
    if os.path.lexists(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def discard_generation(layout: VenvLayout, n: int) -> None:
    """Remove a built generation that will not be used (a later step failed)."""
    _remove_tree(layout.generation_dir(n))
    (layout.state_dir / f"{n}.ok").unlink(missing_ok=True)
    (layout.state_dir / f"pylock.generation-{n}.toml").unlink(missing_ok=True)


def _point(layout: VenvLayout, n: int) -> None:
    """Atomically make ``<venv>`` a relative symlink to generation ``n``."""
    tmp = layout.venv.parent / f".{layout.venv.name}.link-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(Path(layout.state_dir.name) / str(n))
    os.replace(tmp, layout.venv)


def swap_in(layout: VenvLayout, n: int) -> int | None:
    """Make generation ``n`` current; returns the generation it replaced.

    A plain venv directory at ``<venv>`` is adopted as generation ``n - 1``: it is
    renamed (journaled, so an interrupt is undone by :func:`recover`), and still
    works through the symlink because its embedded paths go through ``<venv>``.
    """
    venv = layout.venv
    previous = _own_current(layout)
    if os.path.lexists(venv) and not venv.is_symlink():
        import json

        from stacklock._fs import atomic_write_text

        adopted = n - 1
        dest = layout.generation_dir(adopted)
        if os.path.lexists(dest):
            raise InstallError(f"{dest} exists; cannot adopt {venv}")
        atomic_write_text(layout.journal, json.dumps({"moved_to": str(dest)}) + "\n")
        os.rename(venv, dest)
        atomic_write_text(layout.state_dir / f"{adopted}.ok", '{"adopted": true}\n')
        _point(layout, n)
        layout.journal.unlink()
        return adopted
    _point(layout, n)
    return previous


def rollback(layout: VenvLayout) -> tuple[int, int]:
    """Point ``<venv>`` back at the generation the current one replaced (recorded
    in its ``.ok``), else the newest complete one before it."""
    current = current_generation(layout)
    if current is None:
        raise InstallError(
            f"{layout.venv} is not managed by stacklock install",
            hint="only an environment stacklock installed can be rolled back",
        )
    previous = _replaced(layout, current)
    if previous is None:
        older = [
            g for g in _generations(layout) if g < current and _complete(layout, g)
        ]
        if not older:
            raise InstallError(
                f"{layout.venv}: no environment before generation {current} to restore"
            )
        previous = older[-1]
    _point(layout, previous)
    return current, previous


def _replaced(layout: VenvLayout, n: int) -> int | None:
    """The complete generation ``n`` replaced (recorded in its ``.ok``), if any."""
    from stacklock.bounded import parse_json

    try:
        record = parse_json((layout.state_dir / f"{n}.ok").read_bytes())
    except (OSError, ValueError):
        return None
    previous = record.get("replaces") if isinstance(record, dict) else None
    return previous if isinstance(previous, int) and _complete(layout, previous) \
        else None


KEEP_GENERATIONS = 3  # the current one, the one it replaced, and one more


def prune(layout: VenvLayout, *, keep: int = KEEP_GENERATIONS) -> list[int]:
    """Remove the complete generations older than the newest ``keep`` (and their
    snapshots), so that installs do not fill the disk over time; the current one
    and the one it replaced (what ``--rollback`` goes back to) always stay.
    Returns the numbers removed."""
    current = current_generation(layout)
    if current is None:
        return []
    kept = {current, _replaced(layout, current)}
    complete = [n for n in _generations(layout) if _complete(layout, n)]
    gone = [n for n in complete[:max(len(complete) - keep, 0)] if n not in kept]
    for n in gone:
        discard_generation(layout, n)
        layout.snapshot_path(n).unlink(missing_ok=True)
    return gone
