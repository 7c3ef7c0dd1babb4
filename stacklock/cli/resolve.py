"""``stacklock resolve``: a profile in, a PEP 751 lock out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

__all__ = ["apply_timeout", "resolve", "resolved_now"]


def apply_timeout(args: argparse.Namespace) -> None:
    """``--timeout SECONDS``: each request's deadline, for this process (the
    http module reads ``STACKLOCK_HTTP_TIMEOUT``)."""
    import os

    from stacklock.errors import StacklockError

    if args.timeout is None:
        return
    if not 0 < args.timeout < float("inf"):  # nan compares false
        raise StacklockError(f"--timeout: {args.timeout:g} is not a finite number "
                             "of seconds > 0", hint="e.g. --timeout 60")
    os.environ["STACKLOCK_HTTP_TIMEOUT"] = str(args.timeout)


def resolve(args: argparse.Namespace) -> int:

    from stacklock.cli.output import (
        interactive,
        parse_index_option,
        piped,
        print_json,
        progress,
    )
    from stacklock.errors import StacklockError

    apply_timeout(args)
    from stacklock.resolve.memo import replay_lock

    urls = dict(parse_index_option(item) for item in args.index)
    if args.check and args.profile is None:
        return _check_all(args, urls)
    if args.profile is None:
        raise StacklockError("resolve needs a PROFILE (only --check checks every "
                             "lock in locks/ without one)",
                             hint="stacklock resolve pypi-cu130")
    if args.check:
        return 0 if _check(args, urls)[0] else 1
    # nothing changed since the last resolution of this profile: its lock again,
    # without importing the resolver (stacklock.resolve.memo)
    replayed = replay_lock(args.profile, output=args.output, index_urls=urls,
                           offline=args.offline, refresh=args.refresh,
                           check=not args.no_check, upgrade=args.upgrade,
                           upgrade_packages=args.upgrade_package)
    if replayed is not None:
        if args.json:
            print_json("resolve", replayed.to_dict())
        else:
            _report(args, replayed.render())
        return 0
    if not args.offline:
        from stacklock.http import prepare_tls

        prepare_tls()  # the CA certificates load while the resolver's modules do
    from stacklock.resolve.locking import lock_profile, render_resolve

    live, on_status, on_download = progress(
        enabled=interactive(args), status="resolving", lines=piped(args))
    with live:
        result = lock_profile(args.profile, output=args.output,
                              index_urls=urls, offline=args.offline,
                              refresh=args.refresh, on_status=on_status,
                              on_download=on_download,
                              check=not args.no_check, upgrade=args.upgrade,
                              upgrade_packages=args.upgrade_package)
    if args.json:
        print_json("resolve", result.to_dict())
    else:
        _report(args, render_resolve(result))
    return 0


def resolved_now(args: argparse.Namespace, urls: dict[str, str], *,
                 upgrade: bool, upgrade_packages: list[str],
                 ) -> tuple[Path, str, float]:
    """``(lock path, text, seconds)``: the lock resolving ``args.profile``
    writes now (the lock there preferred as ``resolve`` prefers it, a replay
    where nothing changed), writing nothing: ``resolve --check`` and ``update``."""
    from stacklock.cli.output import interactive, piped, progress
    from stacklock.resolve.memo import replay_lock

    options = {"output": args.output, "index_urls": urls, "offline": args.offline,
               "refresh": args.refresh, "check": not args.no_check,
               "upgrade": upgrade, "upgrade_packages": upgrade_packages}
    replayed = replay_lock(args.profile, write=False, **options)
    if replayed is not None:
        return Path(replayed.lock), replayed.text, replayed.seconds
    from stacklock.resolve.locking import lock_profile

    live, on_status, on_download = progress(
        enabled=interactive(args), status="resolving", lines=piped(args))
    with live:
        result = lock_profile(args.profile, write=False, on_status=on_status,
                              on_download=on_download, **options)
    return Path(result.lock), result.text, result.seconds


def _check_all(args: argparse.Namespace, urls: dict[str, str]) -> int:
    """``resolve --check`` without a PROFILE (the pre-commit hook's default):
    every ``locks/pylock.NAME.toml`` against the profile NAME; 1 when any
    differs. With ``--json``: ``{"locks": [each lock's object]}``."""
    from copy import copy

    from stacklock.cli.output import print_json
    from stacklock.errors import StacklockError

    if args.output:
        raise StacklockError("-o names one lock: give its PROFILE too",
                             hint="stacklock resolve --check PROFILE -o PATH")
    locks = sorted(Path("locks").glob("pylock.*.toml"))
    if not locks:
        raise StacklockError("locks/ has no pylock.NAME.toml to check",
                             hint="stacklock resolve --check PROFILE [-o PATH]")
    from stacklock.errors import ProfileError
    from stacklock.profile import find_profile_path

    names = [lock.name.removeprefix("pylock.").removesuffix(".toml") for lock in locks]
    for lock, name in zip(locks, names, strict=True):
        try:
            find_profile_path(name)
        except ProfileError:  # before any resolve: one line for the lock
            raise StacklockError(
                f"{lock}: no profile named {name!r} (profiles/{name}.toml or a "
                "built-in one) to check it against",
                hint=f"add profiles/{name}.toml, or check a lock made from a profile "
                     f"of another name with: stacklock resolve --check PROFILE -o "
                     f"{lock}") from None
    results = []
    for lock, name in zip(locks, names, strict=True):
        one = copy(args)
        one.profile = name
        one.output = str(lock)
        results.append(_check(one, urls, emit=not args.json))
    if args.json:
        print_json("resolve-check-all", {"locks": [found for _, found in results]})
    return 0 if all(same for same, _ in results) else 1


def _check(args: argparse.Namespace, urls: dict[str, str], *,
           emit: bool = True) -> tuple[bool, dict[str, Any]]:
    """``resolve --check``: resolve as ``resolve`` would, write nothing, and
    compare with the lock there; what differs is shown by ``stacklock diff``'s
    renderer. ``(same, its JSON)``; ``emit=False``: with nothing printed."""
    from stacklock.cli.output import print_json, say

    path, text, seconds = resolved_now(args, urls, upgrade=args.upgrade,
                                       upgrade_packages=args.upgrade_package)
    try:
        current: bytes | None = Path(path).read_bytes()
    except OSError:
        current = None
    same = current == text.encode("utf-8")
    differences = None
    if current is not None and not same:
        from stacklock.diff import diff_locks, render_diff
        from stacklock.lock import parse_lock

        differences = diff_locks(
            parse_lock(current, path=str(path)),
            parse_lock(text.encode("utf-8"), path=f"{path} (resolved now)"))
    found = {"lock": str(path), "profile": args.profile, "up_to_date": same,
             "exists": current is not None, "seconds": round(seconds, 3),
             "diff": differences.to_dict() if differences else None}
    if not emit:
        return same, found
    if args.json:
        print_json("resolve-check", found)
    elif same:
        say(args, f"{path} is up to date with {args.profile} ({seconds:.1f} s)")
    elif current is None:
        say(args, f"{path}: no lock there; stacklock resolve {args.profile} writes it")
    else:
        assert differences is not None
        say(args, render_diff(differences, "text"), end="")
        if not differences.differs:
            say(args, "the files differ only in what the diff does not compare "
                "(header, stacklock version, layout)")
        say(args, f"{path} is not what resolving {args.profile} writes now "
            f"({seconds:.1f} s); stacklock resolve {args.profile} updates it")
    return same, found


def _report(args: argparse.Namespace, text: str) -> None:
    """The lines of a resolution: each phase's one line (-v: every line)."""
    from stacklock.cli.output import brief, say, verbose

    lines = text.split("\n")
    say(args, "\n".join(lines if verbose(args) else brief(lines)))
