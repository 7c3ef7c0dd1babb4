"""Build a new venv generation with uv: the lock copy uv reads, ``uv venv`` and
``uv pip sync`` (or adopting what the head start already ran), and the one-line
error for a failed step. Where generations live and how they are swapped:
:mod:`~stacklock.install.layout`.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from stacklock._fs import atomic_write_bytes, atomic_write_text
from stacklock.errors import HashMismatchError, InstallError, StacklockError
from stacklock.install.early import STEPS
from stacklock.install.plan import build_config
from stacklock.install.uvauth import lock_indexes, uv_credentials
from stacklock.install.uvsteps import BUILD_CONFIG_NAME, uv_environment
from stacklock.uvoutput import read_log

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from packaging.pylock import (
        PackageArchive,
        PackageDirectory,
        PackageSdist,
        PackageWheel,
    )

    from stacklock.install.early import HeadStart
    from stacklock.install.plan import InstallPlan
    from stacklock.lock import Lock, LockedPackage
    from stacklock.runner import Runner

__all__ = ["build_generation", "parse_uv_hash_mismatch"]


FileT = TypeVar("FileT", "PackageWheel", "PackageSdist", "PackageArchive")


def _local_wheel(plan: InstallPlan, wheel: FileT, wheel_dir: Path) -> FileT:
    """``wheel`` as uv should read it: a relative ``path`` made absolute (PEP 751:
    relative to the lock, which uv no longer reads from), a wheel already in the
    artifact store linked under its real filename (uv reads the tags from it)."""
    if wheel.path and not Path(wheel.path).is_absolute():
        wheel = replace(wheel, path=str(plan.lock_path.parent.resolve() / wheel.path))
    from packaging.pylock import PackageArchive

    from stacklock.lock import wheel_sha256

    stored = plan.local_wheels.get(wheel_sha256(wheel) or "")
    if stored is None or isinstance(wheel, PackageArchive):
        return wheel
    link = wheel_dir / wheel.filename
    link.unlink(missing_ok=True)
    link.symlink_to(stored)
    return replace(wheel, name=wheel.filename, url=None, path=str(link))


def _sources(pkg: LockedPackage) -> list[PackageWheel | PackageSdist
                                          | PackageArchive | PackageDirectory]:
    """Everything of ``pkg`` that may name a local ``path``."""
    entry = pkg.entry
    return [*pkg.all_files, *(s for s in (entry.archive, entry.directory)
                              if s is not None)]


def _rewrites(plan: InstallPlan, lock: Lock | None) -> bool:
    """Some file of the lock must point elsewhere for uv: a relative ``path``
    (a file, an archive, a directory), or a file in the artifact store. A
    replayed plan (no lock loaded) never does: :mod:`~stacklock.install.replay`
    remembers no such plan."""
    if lock is None:
        return False
    from packaging.pylock import PackageDirectory

    from stacklock.lock import wheel_sha256

    return any(
        (f.path and not Path(f.path).is_absolute())
        or (not isinstance(f, PackageDirectory)
            and wheel_sha256(f) in plan.local_wheels)
        for p in lock.packages for f in _sources(p)
    )


def _write_uv_lock(plan: InstallPlan, lock: Lock | None) -> None:
    """The lock uv installs from: a copy whose cached wheels (and sdists) use
    ``path``, so uv reads them from disk and still checks every sha256. A lock
    with nothing to rewrite is copied byte for byte (re-rendering 200 packages
    costs a warm install more than uv's own work). Beside it, uv's config for
    the sdists built against the locked runtime, where the lock has any."""
    config = build_config(lock.packages) if lock is not None else None
    if config is not None:
        plan.uv_lock_path.parent.mkdir(parents=True, exist_ok=True)
        (plan.uv_lock_path.parent / BUILD_CONFIG_NAME).write_text(config, "utf-8")
    if not _rewrites(plan, lock):
        plan.uv_lock_path.parent.mkdir(parents=True, exist_ok=True)
        plan.uv_lock_path.write_bytes(plan.lock_bytes)  # the bytes planned from
        return
    assert lock is not None  # _rewrites said so
    wheel_dir = plan.uv_lock_path.parent / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)

    here = plan.lock_path.parent.resolve()

    def local(pkg: LockedPackage) -> LockedPackage:
        entry = pkg.entry
        wheels = [_local_wheel(plan, w, wheel_dir) for w in pkg.wheels] or None
        sdist = entry.sdist and _local_wheel(plan, entry.sdist, wheel_dir)
        archive = entry.archive and _local_wheel(plan, entry.archive, wheel_dir)
        directory = entry.directory
        if directory is not None and not Path(directory.path).is_absolute():
            directory = replace(directory, path=str(here / directory.path))
        return replace(pkg, entry=replace(entry, wheels=wheels, sdist=sdist,
                                          archive=archive, directory=directory))

    from stacklock.lock.write import dump_lock  # tomlkit: only for a rewritten copy

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
        mismatch = parse_uv_hash_mismatch(read_log(log))
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


def _uv_steps(
    plan: InstallPlan,
    lock: Lock | None,
    *,
    runner: Runner,
    logs: dict[str, Path],
    log_for: Callable[[str], Path],
    env: Mapping[str, str] | None,
    head: HeadStart | None,
) -> list[tuple[str, int]]:
    """Run the plan's uv commands, or adopt the head start's run of exactly
    them; ``(step, exit code)`` up to the first failure."""
    if head is not None and head.fits(plan) and not _rewrites(plan, lock):
        logs.update(head.logs)
        return head.wait()
    if head is not None:
        head.cancel()
    _write_uv_lock(plan, lock)
    credentials = uv_credentials(lock_indexes(plan.lock_bytes),
                                 plan.uv_lock_path.parent)
    changes: dict[str, str | None] = {**uv_environment(), **(env or {}),
                                      **credentials}
    results = []
    for step, argv in zip(STEPS, plan.commands, strict=True):
        logs[step] = log_for(step)
        results.append((step, runner.run(argv, log=logs[step], env=changes)))
        if results[-1][1] != 0:
            break
    return results


def build_generation(
    plan: InstallPlan,
    lock: Lock | None,
    *,
    runner: Runner,
    logs: dict[str, Path],
    log_for: Callable[[str], Path],
    env: Mapping[str, str] | None = None,
    head: HeadStart | None = None,
) -> None:
    """``uv venv`` + ``uv pip sync`` into the new generation (or the same two
    already started by ``head``); mark it complete. ``lock`` is None for a
    replayed plan."""
    for step, rc in _uv_steps(plan, lock, runner=runner, logs=logs,
                              log_for=log_for, env=env, head=head):
        if rc != 0:
            shutil.rmtree(plan.generation_dir, ignore_errors=True)
            raise _failed(plan, step, rc, logs[step])
    state = plan.generation_dir.parent
    atomic_write_bytes(state / f"pylock.generation-{plan.generation}.toml",
                       plan.lock_bytes, shared=True)
    atomic_write_text(
        state / f"{plan.generation}.ok",
        json.dumps({"lock": str(plan.lock_path), "replaces": plan.replaced_generation,
                    "python": plan.python}) + "\n",
    )


