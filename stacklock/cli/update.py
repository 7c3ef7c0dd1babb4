"""``stacklock update PROFILE``: re-resolve, and when the lock changes write it
and a summary for a pull request; with ``--validate`` install and judge the new
lock in a scratch venv, and bisect a failure to its culprit.

The pieces of other verbs are handed to :func:`stacklock.update.update_lock`
here (verbs never import each other): resolve's ``resolved_now`` (a replay when
nothing changed, writing nothing, as ``resolve --check``), diff's semantic diff
and markdown, install with its closing validation, and bisect with the
oracle that failed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from stacklock.bisect.oracle import Oracle
    from stacklock.lock import Lock
    from stacklock.update import Validation

__all__ = ["update"]


def _released(args: argparse.Namespace) -> tuple[bool, list[str], str | list[str]]:
    """``(upgrade all, names released, what the result says)``: every package,
    ``--package`` names and patterns (matched against the lock there), or the
    profile's ``prereleases``."""
    from packaging.utils import canonicalize_name

    if args.prereleases and args.package:
        raise StacklockError("--package and --prereleases choose what to release: "
                             "give one", hint="stacklock update PROFILE --prereleases")
    if args.prereleases:
        from stacklock.profile import load_profile

        pre = sorted(load_profile(args.profile).requirements.prereleases)
        if not pre:
            raise StacklockError(f"{args.profile}: the profile names no "
                                 "requirements.prereleases",
                                 hint="--package NAME, or no option for all")
        return False, [str(n) for n in pre], "prereleases"
    if not args.package:
        return True, [], "all"
    locked = _locked_names(args)
    names: set[str] = set()
    for pattern in args.package:
        wanted = canonicalize_name(pattern) if not any(
            ch in pattern for ch in "*?[") else pattern.lower()
        matched = {n for n in locked if fnmatch.fnmatchcase(n, wanted)}
        if not matched and locked:  # what releases nothing is a typo
            raise StacklockError(f"--package {pattern}: matches no package of the "
                                 "lock", hint="a name, or a pattern such as "
                                 "'nvidia-*' matched against the lock's names")
        if not locked and not any(ch in pattern for ch in "*?["):
            matched.add(wanted)  # no lock yet: every package is new anyway
        names |= matched
    return False, sorted(names), sorted(names)


def _locked_names(args: argparse.Namespace) -> set[str]:
    from stacklock.lock import load_lock
    from stacklock.profile import default_lock_path, load_profile

    path = Path(args.output) if args.output else default_lock_path(
        load_profile(args.profile).name)
    if not path.is_file():
        return set()
    return {str(p.name) for p in load_lock(path).packages}


def _diff(old: Lock, new: Lock) -> tuple[Mapping[str, Any], str]:
    from stacklock.diff import diff_locks, render_markdown

    found = diff_locks(old, new)
    return found.to_dict(), render_markdown(found)


def _recorded(folder: Path) -> Any:
    """The last validation report kept for a lock's bytes, by their sha256."""

    def recorded(lock: Path) -> Mapping[str, Any] | None:
        # validate's modules load only for a changed lock: an unchanged
        # update costs what a warm resolve --check does
        from stacklock.validate.report import read_report

        digest = hashlib.sha256(lock.read_bytes()).hexdigest()
        return read_report(folder / "reports" / digest / "report.json")

    return recorded


def _validator(args: argparse.Namespace, folder: Path) -> Any:
    """Install a lock into the scratch venv (its validation closing the
    install, its report kept by the lock's sha256), then run the oracle
    command inside it."""
    from stacklock.bisect.oracle import CommandOracle, venv_env
    from stacklock.cli.archive import archive_for
    from stacklock.cli.output import notice
    from stacklock.install.run import install_lock
    from stacklock.update import Validation

    command = _command(args)

    def validate(lock: Path) -> Validation:
        digest = hashlib.sha256(lock.read_bytes()).hexdigest()
        venv = folder / "venv"
        try:
            result = install_lock(
                lock, venv=venv, python=args.python, no_toolkit=args.no_toolkit,
                validate=True, allow_no_gpu=args.allow_no_gpu,
                report_dir=folder / "reports" / digest,
                archive=archive_for(args, lock), on_notice=notice)
        except StacklockError as exc:
            if exc.exit_code == 3:
                raise  # the network: could not run (exit 3)
            return Validation(ok=False, verdict="could not run", error=str(exc))
        report = result.validation.to_dict() if result.validation else None
        verdict = report["verdict"] if report else "could not run"
        code = None
        if command:
            judged = CommandOracle(argv=tuple(command), timeout=args.step_timeout
                                   ).judge(venv, venv_env(venv, None),
                                           folder / "oracle.log", lock)
            code = judged.exit_code
        ok = result.ok and (not command or code == 0)
        return Validation(ok=ok, verdict=verdict, report=report,
                          oracle=tuple(command), oracle_exit_code=code,
                          error=result.validate_error)

    return validate


def _command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    return command[1:] if command[:1] == ["--"] else command


def _failed_imports(validation: Validation) -> list[str]:
    checks = (validation.report or {}).get("checks") or []
    return sorted(str(c["name"]).removeprefix("import:") for c in checks
                  if str(c.get("name", "")).startswith("import:")
                  and c.get("status") == "fail")


def _gate_failed(validation: Validation) -> bool:
    gate = (validation.report or {}).get("gate") or {}
    return any(c.get("status") == "fail" for c in gate.get("checks") or [])


def _oracle(args: argparse.Namespace, good: Path,
            validation: Validation) -> tuple[Oracle, str] | None:
    """The oracle that failed, for bisect: the command, else the imports that
    failed, else the gate; None when only the machine's checks failed."""
    from stacklock.bisect import CommandOracle, GateOracle
    from stacklock.cli.bisect import _gate_measure

    command = _command(args)
    if command and validation.oracle_exit_code != 0:
        argv = tuple(command)
    elif imports := _failed_imports(validation):
        argv = ("python", "-c", "import " + ", ".join(imports))
    elif _gate_failed(validation):
        return (GateOracle(measure=_gate_measure(good), repeat=args.repeat or 3),
                f"gate x{args.repeat or 3}")
    else:
        return None
    return (CommandOracle(argv=argv, timeout=args.step_timeout),
            f"{json.dumps(list(argv))} x1 timeout {args.step_timeout:g}")


def _bisector(args: argparse.Namespace, folder: Path) -> Any:
    def bisect(good: Path, bad: Path, validation: Validation
               ) -> Mapping[str, Any] | None:
        from stacklock.bisect import bisect_locks
        from stacklock.cli.archive import archive_for
        from stacklock.cli.bisect import _tools
        from stacklock.http import make_http_client

        found = _oracle(args, good, validation)
        if found is None:
            return None
        oracle, ident = found
        with make_http_client(timeout=120.0) as http:
            result = bisect_locks(
                good, bad, folder=folder / "bisect",
                tools=_tools(args, http, archive_for(args, good, bad)),
                oracle=oracle, oracle_id=hashlib.sha256(ident.encode()).hexdigest(),
                max_steps=args.max_steps)
        return result.to_dict()

    return bisect


def update(args: argparse.Namespace) -> int:
    from stacklock.cli.output import parse_index_option, print_json, say
    from stacklock.cli.resolve import apply_timeout, resolved_now
    from stacklock.profile import default_lock_path, load_profile
    from stacklock.update import UpdateTools, render_summary, render_update, update_lock

    apply_timeout(args)
    from stacklock.cli.parser import check_step_options

    check_step_options(args)
    if _command(args) and not args.validate:
        raise StacklockError("an oracle command after '--' runs in the validated "
                             "venv: give --validate too",
                             hint="stacklock update PROFILE --validate -- CMD")
    if args.archive:  # a URL it cannot read fails now, not after resolving
        from stacklock.lockarchive import Archive

        Archive.from_options(args.archive, first=args.archive_first)
    urls = dict(parse_index_option(item) for item in args.index)
    upgrade, names, released = _released(args)
    lock = Path(args.output) if args.output else default_lock_path(
        load_profile(args.profile).name)
    folder = Path(args.dir)

    def resolve() -> tuple[str, float]:
        _, text, seconds = resolved_now(args, urls, upgrade=upgrade,
                                        upgrade_packages=names)
        return text, seconds

    tools = UpdateTools(
        resolve=resolve, diff=_diff,
        validate=_validator(args, folder) if args.validate else None,
        recorded=_recorded(folder),
        bisect=_bisector(args, folder) if args.validate else None)
    result = update_lock(lock, profile=args.profile, tools=tools, folder=folder,
                         summary=Path(args.summary) if args.summary else None,
                         released=released, render=render_summary)
    if args.json:
        print_json("update", result.to_dict())
    else:
        say(args, render_update(result))
    return result.exit_code
