"""Build a new venv beside the old one and swap it in atomically; roll back.

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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from stacklock._fs import atomic_write_text
from stacklock.errors import HashMismatchError, InstallError, StacklockError
from stacklock.lock import wheel_sha256

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from packaging.pylock import PackageSdist, PackageWheel

    from stacklock.install.plan import InstallPlan
    from stacklock.lock import Lock, LockedPackage
    from stacklock.runner import Runner

__all__ = [
    "VenvLayout",
    "build_generation",
    "current_generation",
    "discard_generation",
    "locked_state",
    "next_generation",
    "parse_uv_hash_mismatch",
    "recover",
    "rollback",
    "swap_in",
]


@dataclass(frozen=True, kw_only=True)
class VenvLayout:
    """``<venv>`` is a symlink to ``<venv>.stacklock/<n>``; the folder holds history.

    uv venvs embed their absolute path (activate scripts, shebangs), so they cannot
    be moved; each generation is built at its final place and only the symlink is
    swapped (``os.replace``, atomic).
    """

    venv: Path

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


def next_generation(layout: VenvLayout) -> int:
    return max(_generations(layout), default=0) + 1


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
        entry = json.loads(layout.journal.read_text("utf-8"))
        moved = Path(entry["moved_to"])
        if not os.path.lexists(layout.venv) and moved.is_dir():
            os.rename(moved, layout.venv)
            done.append(f"restored {layout.venv} from an interrupted swap")
        layout.journal.unlink()
    current = current_generation(layout)
    for n in _generations(layout):
        if n != current and not _complete(layout, n):
            shutil.rmtree(layout.generation_dir(n), ignore_errors=True)
            done.append(f"removed unfinished generation {n}")
    if layout.state_dir.is_dir():
        for work in layout.state_dir.glob("work-*"):
            shutil.rmtree(work, ignore_errors=True)
    return done


FileT = TypeVar("FileT", "PackageWheel", "PackageSdist")


def _local_wheel(plan: InstallPlan, wheel: FileT, wheel_dir: Path) -> FileT:
    """``wheel`` as uv should read it: a relative ``path`` made absolute (PEP 751:
    relative to the lock, which uv no longer reads from), a wheel already in the
    artifact store linked under its real filename (uv reads the tags from it)."""
    if wheel.path and not Path(wheel.path).is_absolute():
        wheel = replace(wheel, path=str(plan.lock_path.parent.resolve() / wheel.path))
    stored = plan.local_wheels.get(wheel_sha256(wheel) or "")
    if stored is None:
        return wheel
    link = wheel_dir / wheel.filename
    link.unlink(missing_ok=True)
    link.symlink_to(stored)
    return replace(wheel, name=wheel.filename, url=None, path=str(link))


def _rewrites(plan: InstallPlan, lock: Lock) -> bool:
    """Some file of the lock must point elsewhere for uv: a relative ``path``,
    or a file in the artifact store."""
    return any(
        (f.path and not Path(f.path).is_absolute())
        or wheel_sha256(f) in plan.local_wheels
        for p in lock.packages for f in p.files
    )


def _write_uv_lock(plan: InstallPlan, lock: Lock) -> None:
    """The lock uv installs from: a copy whose cached wheels (and sdists) use
    ``path``, so uv reads them from disk and still checks every sha256. A lock
    with nothing to rewrite is copied byte for byte (re-rendering 200 packages
    costs a warm install more than uv's own work)."""
    if not _rewrites(plan, lock):
        plan.uv_lock_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(plan.lock_path, plan.uv_lock_path)
        return
    wheel_dir = plan.uv_lock_path.parent / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)

    def local(pkg: LockedPackage) -> LockedPackage:
        if pkg.sdist is not None:  # built by uv from the stored sdist
            sdist = _local_wheel(plan, pkg.sdist, wheel_dir)
            return replace(pkg, entry=replace(pkg.entry, sdist=sdist))
        wheels = [_local_wheel(plan, w, wheel_dir) for w in pkg.wheels]
        return replace(pkg, entry=replace(pkg.entry, wheels=wheels))

    from stacklock.lock import dump_lock  # tomlkit: only for a rewritten copy

    packages = tuple(local(p) for p in lock.packages)
    copy = replace(lock, path=str(plan.uv_lock_path), packages=packages)
    dump_lock(copy, plan.uv_lock_path)


# uv 0.13's report of a download whose bytes are not the locked ones
_UV_HASH_MISMATCH = re.compile(
    r"Hash mismatch for `(?P<dist>[^`]+)`"
    r"\s*Expected:\s*sha256:(?P<expected>[0-9a-f]{64})\s*Computed:\s*sha256:(?P<actual>[0-9a-f]{64})"
)


def parse_uv_hash_mismatch(text: str) -> tuple[str, str, str] | None:
    """``(name==version, expected, actual)`` from uv's log of a failed sync."""
    match = _UV_HASH_MISMATCH.search(text)
    if match is None:
        return None
    return match["dist"], match["expected"], match["actual"]


def _failed(plan: InstallPlan, step: str, rc: int, log: Path) -> StacklockError:
    """The one-line error for a failed uv step: a wheel that is not the locked
    one is named with both hashes; anything else points at the log."""
    try:
        mismatch = parse_uv_hash_mismatch(log.read_text("utf-8", errors="replace"))
    except OSError:
        mismatch = None
    if mismatch is not None:
        dist, expected, actual = mismatch
        url = next((d.url for d in plan.downloads if d.sha256 == expected), dist)
        return HashMismatchError(url=url, expected=expected, actual=actual,
                                 note=f"{plan.venv} was not changed")
    return InstallError(
        f"{step} failed with exit code {rc}; {plan.venv} was not changed",
        hint=f"read the log {log}",
    )


def build_generation(
    plan: InstallPlan,
    lock: Lock,
    *,
    runner: Runner,
    logs: dict[str, Path],
    log_for: Callable[[str], Path],
    env: Mapping[str, str] | None = None,
) -> None:
    """``uv venv`` + ``uv pip sync`` into the new generation; mark it complete."""
    _write_uv_lock(plan, lock)
    for step, argv in zip(("uv-venv", "uv-pip-sync"), plan.commands, strict=True):
        log = log_for(step)
        logs[step] = log
        rc = runner.run(argv, log=log, env=env)
        if rc != 0:
            shutil.rmtree(plan.generation_dir, ignore_errors=True)
            raise _failed(plan, step, rc, log)
    state = plan.generation_dir.parent
    atomic_write_text(
        state / f"pylock.generation-{plan.generation}.toml",
        plan.lock_path.read_text("utf-8"),
    )
    atomic_write_text(
        state / f"{plan.generation}.ok",
        json.dumps({"lock": str(plan.lock_path), "replaces": plan.replaced_generation})
        + "\n",
    )


def discard_generation(layout: VenvLayout, n: int) -> None:
    """Remove a built generation that will not be used (a later step failed)."""
    shutil.rmtree(layout.generation_dir(n), ignore_errors=True)
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
    previous = current_generation(layout)
    if venv.is_symlink() and previous is None:
        raise InstallError(
            f"{venv} is a symlink stacklock did not make",
            hint="remove it or install to another --venv",
        )
    if os.path.lexists(venv) and not venv.is_symlink():
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
    try:
        record = json.loads((layout.state_dir / f"{current}.ok").read_text("utf-8"))
    except (OSError, ValueError):
        record = {}
    previous = record.get("replaces")
    if not (isinstance(previous, int) and _complete(layout, previous)):
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
