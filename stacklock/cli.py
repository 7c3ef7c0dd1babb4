"""The command line: parse arguments, make one library call, print, exit.

This is the only module that prints. Every ``StacklockError`` becomes one line on
stderr and its exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from stacklock import __version__
from stacklock.errors import StacklockError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["main"]


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def _progress(*, enabled: bool, status: str | None) -> tuple[Any, Any, Any]:
    """(context, on_status, on_download) for a terminal: a rich status line and one
    bar per download; off in pipes and with --json, where both callbacks are None."""
    import contextlib

    if not enabled:
        return contextlib.nullcontext(), None, None
    from rich.console import Console
    from rich.filesize import decimal
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                        BarColumn(), TextColumn("{task.fields[size]}"),
                        console=Console(stderr=True), transient=True)
    files: dict[str, Any] = {}
    on_status = None
    if status is not None:
        line = progress.add_task(status, total=None, size="")

        def on_status(text: str) -> None:
            progress.update(line, description=f"{status}: {text}")

    def on_download(name: str, done: int, total: int | None) -> None:
        if name not in files:
            files[name] = progress.add_task(name, total=total, size="")
        size = decimal(done) + (f"/{decimal(total)}" if total else "")
        progress.update(files[name], completed=done, total=total, size=size)

    return progress, on_status, on_download


def _cmd_profiles(args: argparse.Namespace) -> int:
    from stacklock.profile import list_profiles, load_profile

    rows = []
    for name in list_profiles():
        profile = load_profile(name)
        rows.append({"name": name, "description": profile.description})
    if args.json:
        _print_json(rows)
    else:
        width = max((len(r["name"]) for r in rows), default=0)
        for row in rows:
            print(f"{row['name']:<{width}}  {row['description']}")
    return 0


def _cmd_links(args: argparse.Namespace) -> int:
    import re
    from datetime import datetime

    from stacklock._fs import cache_dir
    from stacklock.index import (
        IndexClient,
        find_links,
        make_http_client,
        render_links,
    )
    from stacklock.profile import IndexSpec
    from stacklock.target import Target

    named = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)=(.+)$", args.index)
    name, url = (named.group(1), named.group(2)) if named else ("index", args.index)
    index = IndexSpec(name=name, url=url.rstrip("/") or url,
                      kind="flat" if args.flat else "simple")
    target = Target(python=args.python, platform=args.platform,
                    manylinux=args.manylinux)
    cutoff = None
    if args.exclude_newer:
        try:
            cutoff = datetime.fromisoformat(args.exclude_newer.replace("Z", "+00:00"))
        except ValueError:
            raise StacklockError(
                f"--exclude-newer {args.exclude_newer!r} is not an RFC 3339 time",
                hint='write it as "2026-02-15T00:00:00Z"') from None
    with make_http_client() as http:
        client = IndexClient(http, cache_dir=cache_dir(), offline=args.offline,
                             refresh=args.refresh)
        report = find_links(args.project, index, target, client=client,
                            exclude_newer=cutoff)
    if args.json:
        _print_json(report.to_dict())
    else:
        import shutil

        width = max(100, shutil.get_terminal_size((160, 24)).columns)
        print(render_links(report, width=width), end="")
    return 0


def _cmd_cuda_list(args: argparse.Namespace) -> int:
    from stacklock.cuda.catalog import load_catalog, render_releases

    catalog = load_catalog()
    if args.json:
        _print_json([r.to_dict(args.platform) for r in catalog.releases])
    else:
        print(render_releases(catalog, args.platform))
    return 0


def _cmd_cuda_show(args: argparse.Namespace) -> int:
    from stacklock.cuda.catalog import load_catalog, render_release

    release = load_catalog().get(args.cuda_version)
    if args.json:
        _print_json(release.to_dict(args.platform))
    else:
        print(render_release(release, args.platform))
    return 0


def _cmd_cuda_check_driver(args: argparse.Namespace) -> int:
    from pathlib import Path

    from stacklock.cuda.catalog import load_catalog
    from stacklock.cuda.driver import (
        check_driver,
        load_lock_cuda,
        read_driver,
        render_driver_report,
    )

    toolkit, wheels = (load_lock_cuda(Path(args.lock)) if args.lock
                       else (None, {}))
    report = check_driver(load_catalog(), read_driver(),
                          toolkit=args.cuda_version or toolkit, wheels=wheels)
    if args.json:
        _print_json(report.to_dict())
    else:
        print(render_driver_report(report))
    return 0 if report.ok else 1


def _cmd_cuda_refresh(args: argparse.Namespace) -> int:
    from pathlib import Path

    from stacklock._fs import atomic_write_bytes
    from stacklock.cuda.catalog import load_catalog
    from stacklock.cuda.refresh import refresh_catalog, render_refresh
    from stacklock.index.client import make_http_client

    with make_http_client() as http:
        report = refresh_catalog(http, load_catalog(), versions=args.only or None)
    if args.write:
        data = json.dumps(report.catalog.to_dict(), indent=1) + "\n"
        atomic_write_bytes(Path(args.write), data.encode())
    if args.json:
        _print_json(report.to_dict())
    else:
        print(render_refresh(report))
    return 0


def _cmd_resolve(args: argparse.Namespace) -> int:
    from stacklock.resolve.command import lock_profile, render_resolve

    urls: dict[str, str] = {}
    for item in args.index:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise StacklockError(f"--index {item!r} is not NAME=URL",
                                 hint="e.g. --index pypi=http://127.0.0.1:8080/simple")
        urls[name] = url
    live, on_status, on_download = _progress(
        enabled=sys.stderr.isatty() and not args.json, status="resolving")
    with live:
        result = lock_profile(args.profile, output=args.output, index_urls=urls,
                              offline=args.offline, refresh=args.refresh,
                              on_status=on_status, on_download=on_download)
    # the process exits next: spare the collector (and the interpreter's exit) a
    # walk over the ~300k objects a large resolution leaves (0.25 s each)
    import gc

    gc.freeze()
    if args.json:
        _print_json(result.to_dict())
    else:
        print(render_resolve(result))
    return 0


def _cmd_install(args: argparse.Namespace) -> int:
    from pathlib import Path

    from stacklock.install import (
        install_lock,
        render_install,
        render_rollback,
        rollback_install,
    )

    if args.rollback:
        back = rollback_install(Path(args.venv))
        _print_json(back.to_dict()) if args.json else print(render_rollback(back))
        return 0
    if args.lock is None:
        raise StacklockError("install needs a LOCK", hint="stacklock install LOCK")

    live, _, on_download = _progress(
        enabled=sys.stderr.isatty() and not args.json, status=None)
    with live:
        result = install_lock(
            Path(args.lock),
            venv=Path(args.venv),
            python=args.python,
            toolkit_prefix=Path(args.toolkit_prefix) if args.toolkit_prefix else None,
            no_toolkit=args.no_toolkit,
            dry_run=args.dry_run,
            allow_no_gpu=args.allow_no_gpu,
            link_cuda_at=Path("/usr/local/cuda") if args.link_cuda else None,
            validate=not args.no_validate,
            on_download=on_download,
        )
    _print_json(result.to_dict()) if args.json else print(render_install(result))
    return 0 if getattr(result.validation, "ok", True) else 1


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from stacklock.snapshot import make_snapshot, render_snapshot, write_snapshot

    venv = Path(args.venv)
    if args.output:
        print(write_snapshot(venv, Path(args.output)))
    else:
        print(render_snapshot(make_snapshot(venv)), end="")
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    import shutil

    from stacklock.diff import diff_lock_files
    from stacklock.diff_render import render_diff

    result = diff_lock_files(args.old, args.new)
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size((110, 24)).columns if tty else 110
    print(render_diff(result, args.format, color=tty, width=width), end="")
    return 1 if args.exit_code and result.differs else 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from stacklock.validate import render_text, validate

    result = validate(
        args.lock, venv=args.venv, python=args.python, gate=not args.no_gate,
        probes=not args.no_probes, report_dir=args.report,
        toolkit_prefix=args.toolkit_prefix,
    )
    _print_json(result.to_dict()) if args.json else print(render_text(result))
    return result.exit_code


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stacklock",
        description="Lock, install, validate and diff GPU software stacks.",
    )
    parser.add_argument(
        "--version", action="version", version=f"stacklock {__version__}"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("profiles", help="list the built-in profiles")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_profiles)

    p = sub.add_parser(
        "links", help="list every link an index has for a project, and why each "
        "fits the target or not")
    p.add_argument("project")
    p.add_argument("--index", required=True, metavar="[NAME=]URL",
                   help="https URL of a simple index, a file:// URL or a folder")
    p.add_argument("--flat", action="store_true",
                   help="the URL is a find-links page, not a simple index root")
    p.add_argument("--python", default="3.12")
    p.add_argument("--platform", default="linux_x86_64")
    p.add_argument("--manylinux", default="2_28")
    p.add_argument("--exclude-newer", metavar="TIME")
    p.add_argument("--offline", action="store_true", help="use only the page cache")
    p.add_argument("--refresh", action="store_true",
                   help="revalidate cached pages with the index")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_links)

    p = sub.add_parser("resolve", help="resolve a profile into a PEP 751 lock")
    p.add_argument("profile", metavar="PROFILE",
                   help="a built-in profile name or a path to a .toml file")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write the lock (default locks/pylock.PROFILE.toml)")
    p.add_argument("--index", action="append", default=[], metavar="NAME=URL",
                   help="point the profile's index NAME at another URL (a mirror)")
    p.add_argument("--offline", action="store_true",
                   help="use only the caches; no network")
    p.add_argument("--refresh", action="store_true",
                   help="revalidate cached pages with the indexes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_resolve)

    cuda = sub.add_parser(
        "cuda", help="CUDA toolkit releases, the local driver, catalog refresh")
    cuda_sub = cuda.add_subparsers(dest="cuda_command", required=True,
                                   metavar="CUDA_COMMAND")
    p = cuda_sub.add_parser("list", help="the CUDA releases stacklock knows")
    p.add_argument("--platform", default="linux-x86_64",
                   help="linux-x86_64 or linux-sbsa (default linux-x86_64)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_cuda_list)
    p = cuda_sub.add_parser("show", help="one release: runfile, URL, hashes, drivers")
    p.add_argument("cuda_version", metavar="VERSION")
    p.add_argument("--platform", default="linux-x86_64",
                   help="linux-x86_64 or linux-sbsa (default linux-x86_64)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_cuda_show)
    p = cuda_sub.add_parser(
        "check-driver", help="does the local driver run a toolkit and a lock's "
        "wheels? (exit 1 if not)")
    p.add_argument("cuda_version", metavar="VERSION", nargs="?")
    p.add_argument("--lock", metavar="LOCK",
                   help="check the toolkit and wheels of this pylock file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_cuda_check_driver)
    p = cuda_sub.add_parser(
        "refresh", help="check the embedded catalog against NVIDIA's site")
    p.add_argument("--version", dest="only", action="append", metavar="VERSION",
                   help="check only this release (repeatable)")
    p.add_argument("--write", metavar="PATH",
                   help="write the refreshed catalog (JSON) to PATH")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_cuda_refresh)

    p = sub.add_parser("install", help="install a lock: wheels (uv) and toolkit")
    p.add_argument("lock", metavar="LOCK", nargs="?", help="the pylock file")
    p.add_argument("--venv", default=".venv", help="the venv path (a symlink)")
    p.add_argument("--python", help="interpreter to build the venv from")
    p.add_argument("--toolkit-prefix", metavar="PATH", help="where the toolkit goes")
    p.add_argument("--no-toolkit", action="store_true", help="wheels only")
    p.add_argument("--dry-run", action="store_true", help="print the plan only")
    p.add_argument("--rollback", action="store_true", help="restore the previous venv")
    p.add_argument("--allow-no-gpu", action="store_true",
                   help="install without a driver (e.g. to build an image)")
    p.add_argument("--link-cuda", action="store_true",
                   help="also point /usr/local/cuda at the new toolkit")
    p.add_argument("--no-validate", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_install)

    p = sub.add_parser("snapshot", help="a PEP 751 lock of what a venv holds")
    p.add_argument("--venv", default=".venv")
    p.add_argument("-o", "--output", metavar="PATH", help="write here, else stdout")
    p.set_defaults(func=_cmd_snapshot)

    p = sub.add_parser("diff", help="what changed between two PEP 751 locks")
    p.add_argument("old", metavar="OLD", help="a lock, a uv pylock.toml or a snapshot")
    p.add_argument("new", metavar="NEW")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument(
        "--exit-code", action="store_true", help="exit 1 when the locks differ"
    )
    p.set_defaults(func=_cmd_diff)

    p = sub.add_parser("validate", help="check an installed venv against its lock")
    p.add_argument("lock", metavar="LOCK", nargs="?", help="the pylock file")
    p.add_argument("--venv", default=".venv", help="the venv to check")
    p.add_argument("--python", help="check this interpreter instead of --venv's")
    p.add_argument("--toolkit-prefix", metavar="PATH",
                   help="the toolkit to check (default: the lock's prefix)")
    p.add_argument("--no-gate", action="store_true", help="skip the throughput gate")
    p.add_argument("--no-probes", action="store_true", help="skip the GPU probes")
    p.add_argument("--report", metavar="DIR",
                   help="write report.json, report.md and plots here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_validate)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except StacklockError as exc:
        print(f"stacklock: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("stacklock: interrupted; nothing was half-written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
