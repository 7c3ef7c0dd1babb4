"""``stacklock bisect GOOD BAD -- CMD``: which change between two locks breaks it.

The verb borrows three pieces of other verbs, handed to it here (verbs never
import each other): ``stacklock diff``'s semantic diff for the changes, ``stacklock
install`` for each intermediate environment (into one scratch venv, every wheel
kept in the artifact store so a later step fetches nothing twice), and, with
``--gate``, the validation gate as the oracle. A pack (``stacklock pack``) is
unpacked into the store first, so two packs bisect with no network.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping, Sequence

    import httpx

    from stacklock.bisect import Change, Group, Step, Tools
    from stacklock.bisect.oracle import Oracle
    from stacklock.lock import Lock
    from stacklock.lockarchive import Archive

__all__ = ["bisect"]


def _changes(good: Lock, bad: Lock) -> list[Change]:
    """The semantic diff's package changes, and the toolkit as one change."""
    from stacklock.bisect import TOOLKIT, Change
    from stacklock.diff import diff_locks

    found = diff_locks(good, bad)
    out = [Change(name=p.name.partition(";")[0].strip(), kind=p.change, old=p.old,
                  new=p.new) for p in found.packages]
    if found.toolkit:
        old, new = good.cuda, bad.cuda
        out.append(Change(name=TOOLKIT, kind="toolkit",
                          old=old.version if old else None,
                          new=new.version if new else None))
    unique = {c.name: c for c in out}  # a name listed under two markers: once
    return list(unique.values())


def _installer(args: argparse.Namespace, archive: Archive | None, *,
               unknown_runfile: bool) -> Callable[[Path, Path], int]:
    """Install a lock into the scratch venv, every wheel through the artifact
    store (fetched once for the whole bisect); returns the bytes it fetched,
    as install measured them (its store's, and uv's of any file not there)."""
    from stacklock.cli.output import notice
    from stacklock.install.inputs import Wanted
    from stacklock.install.run import install_lock

    wanted = Wanted(unknown_runfile=unknown_runfile)

    def install(lock: Path, venv: Path) -> int:
        result = install_lock(lock, venv=venv, python=args.python,
                              no_toolkit=args.no_toolkit, validate=False,
                              allow_no_gpu=True, prefetch=True, archive=archive,
                              wanted=wanted, on_notice=notice)
        fetched = result.fetched
        if fetched is None:  # the venv held this very lock: nothing was done
            return 0
        return fetched.stacklock_bytes + (fetched.uv_bytes or 0)

    return install


def _tools(args: argparse.Namespace, http: httpx.Client,
           archive: Archive | None, *, unknown_runfile: bool = False) -> Tools:
    from stacklock._fs import cache_dir
    from stacklock.bisect import Tools
    from stacklock.bisect.requirements import RequirementReader
    from stacklock.metadata.fetch import MetadataFetcher
    from stacklock.store import ArtifactStore

    # the wheels' METADATA (grouping the changes) falls back to the archive too
    fetcher = MetadataFetcher(http, cache_dir=cache_dir(), store=ArtifactStore(
        cache_dir() / "artifacts", archive=archive))
    return Tools(diff=_changes, install=_installer(args, archive,
                                                       unknown_runfile=unknown_runfile),
                 requirements=lambda lock: RequirementReader(fetcher, lock),
                 read_bytes=lambda: fetcher.bytes_read)


def _gate_measure(good: Path) -> Callable[[Path, Path, Path, Mapping[str, str]],
                                            float]:
    """The validation gate's tokens per second at the lowest concurrency, of
    its last phase (speculative when it has one)."""
    from stacklock.lock import load_lock
    from stacklock.validate.gate import run_gate
    from stacklock.validation import parse_validate_config

    config = parse_validate_config(load_lock(good).validate, path=str(good)).gate
    if config is None:
        raise StacklockError(f"{good}: the lock has no [tool.stacklock.validate.gate]",
                             hint="bisect with a command instead: -- CMD ARGS")

    def measure(venv: Path, lock: Path, log: Path, env: Mapping[str, str]) -> float:
        result = run_gate(config, python=venv / "bin" / "python",
                          log_dir=log.parent / "gate", base_env=env)
        for phase in reversed(result.phases):
            if phase.error:
                raise StacklockError(f"gate {phase.name}: {phase.error}")
            if phase.levels:
                return min(phase.levels, key=lambda lv: lv.concurrency
                           ).tokens_per_second
        raise StacklockError("the gate measured nothing")

    return measure


def _lock_of(path: str) -> Path:
    """The lock of ``path``: itself, or a pack's, unpacked into the store."""
    from stacklock.pack.format import is_pack

    if not is_pack(path):
        return Path(path)
    from stacklock._fs import cache_dir
    from stacklock.pack.format import read_manifest
    from stacklock.pack.install import unpack_verified
    from stacklock.store import ArtifactStore

    manifest = read_manifest(path)
    lock = cache_dir() / "packs" / manifest.lock_sha256 / manifest.lock.name
    unpack_verified(Path(path), manifest, ArtifactStore(cache_dir() / "artifacts"),
                    lock_to=lock)
    return lock


def _oracle(args: argparse.Namespace, good: Path) -> tuple[Oracle, str]:
    from stacklock.bisect import CommandOracle, GateOracle

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if args.gate == bool(command):
        raise StacklockError(
            "bisect needs one oracle: a command after '--', or --gate",
            hint="stacklock bisect GOOD BAD -- python -c 'import numpy'")
    from stacklock.cli.parser import check_step_options

    check_step_options(args)
    repeat = args.repeat or (3 if args.gate else 1)
    if args.gate:
        return (GateOracle(measure=_gate_measure(good), repeat=repeat),
                f"gate x{repeat}")
    return (CommandOracle(argv=tuple(command), timeout=args.step_timeout,
                          repeat=repeat),
            f"{json.dumps(command)} x{repeat} timeout {args.step_timeout:g}")


def bisect(args: argparse.Namespace) -> int:
    from stacklock.bisect import (
        bisect_locks,
        render_bisect,
        render_groups,
        render_step,
    )
    from stacklock.cli.archive import archive_for
    from stacklock.http import make_http_client

    good, bad = _lock_of(args.good), _lock_of(args.bad)
    archive = archive_for(args, good, bad)
    oracle, ident = _oracle(args, good)
    quiet = args.json or args.verbosity < 0
    total = [0]

    def on_groups(groups: Sequence[Group]) -> None:
        total[0] = len({n for g in groups for n in g.names})
        if not quiet:
            print(render_groups(groups), end="", flush=True)

    def on_step(step: Step) -> None:
        if not quiet:
            print(render_step(step, total[0]), flush=True)

    folder = Path(args.dir)
    with make_http_client(timeout=120.0) as http:
        result = bisect_locks(good, bad, folder=folder,
                              tools=_tools(args, http, archive,
                                           unknown_runfile=args.allow_unknown_runfile),
                              oracle=oracle,
                              oracle_id=hashlib.sha256(ident.encode()).hexdigest(),
                              max_steps=args.max_steps, on_step=on_step,
                              on_groups=on_groups)
    if args.json:
        from stacklock.cli.output import print_json

        print_json("bisect", result.to_dict())
    elif not quiet:
        print(render_bisect(result, steps=False), end="")
    return 0 if result.found else 1
