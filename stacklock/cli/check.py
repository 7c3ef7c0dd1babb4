"""``stacklock check LOCK``: the lock's shared objects against what it provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.cli.output import (
    brief,
    interactive,
    piped,
    print_json,
    progress,
    say,
    verbose,
)

if TYPE_CHECKING:
    import argparse

    from stacklock.native import NativeWheel

__all__ = ["check"]


def check(args: argparse.Namespace) -> int:
    from stacklock._fs import cache_dir
    from stacklock.http import make_http_client, prepare_tls

    prepare_tls()  # the CA certificates load while the checker's modules do
    from stacklock.native import summarize
    from stacklock.native.lockcheck import check_lock_file
    from stacklock.resolve.locking import render_native

    live, on_status, _ = progress(enabled=interactive(args), status="checking",
                                  lines=piped(args))
    done: list[str] = []

    def on_wheel(wheel: NativeWheel) -> None:
        done.append(wheel.filename)
        if on_status is not None:
            on_status(f"{len(done)} wheels read")

    with live, make_http_client() as http:
        report = check_lock_file(args.lock, http=http, cache_dir=cache_dir(),
                                 offline=args.offline, on_wheel=on_wheel)
    if args.json:
        print_json("check", {"lock": str(args.lock), **report.to_dict()})
        return 0 if report.ok else 1
    verdict = "passed" if report.ok else "failed"
    lines = [f"{args.lock}: native check {verdict}",
             *(f"  {line}" for line in summarize(report.findings))]
    native = render_native(report)
    # the findings are the answer: every one; the rest one line unless -v
    say(args, "\n".join(lines + (native if verbose(args) else brief(native))))
    return 0 if report.ok else 1
