"""``stacklock pack``: a lock into one file for a node with no network;
``--list`` shows a pack; ``stacklock install PACK`` installs one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.cli.output import interactive, notice, print_json, progress, say
from stacklock.errors import StacklockError

if TYPE_CHECKING:
    import argparse

__all__ = ["install_from_pack", "pack"]


def pack(args: argparse.Namespace) -> int:
    from stacklock.pack.format import read_manifest, render_listing

    if args.list:
        path = Path(args.target)
        manifest = read_manifest(path)
        size = path.stat().st_size
        if args.json:
            print_json("pack-list", manifest.to_json(path=path, size=size))
        else:
            say(args, render_listing(manifest, path, size))
        return 0
    if not args.output and not args.dry_run:
        raise StacklockError("pack needs -o FILE", hint="stacklock pack LOCK -o FILE")
    from stacklock.cli.archive import archive_for
    from stacklock.pack.writer import render_pack, write_pack

    live, on_status, on_download = progress(enabled=interactive(args),
                                            status="packing")
    with live:
        result = write_pack(args.target, args.output or "", no_toolkit=args.no_toolkit,
                            with_plots=args.with_plots, dry_run=args.dry_run,
                            on_status=on_status, on_download=on_download,
                            archive=archive_for(args, args.target))
    print_json("pack", result.to_dict()) if args.json else \
        say(args, render_pack(result))
    return 0


def install_from_pack(args: argparse.Namespace) -> int:
    """``stacklock install PACK``: the pack's bytes checked, then as for a lock."""
    from stacklock.pack.install import install_pack, render_pack_install

    if args.no_toolkit or args.dry_run or args.link_cuda or args.no_validate:
        raise StacklockError(f"{args.lock} is a pack: --no-toolkit, --dry-run, "
                             "--link-cuda and --no-validate apply to locks",
                             hint="stacklock pack --list PACK shows what it holds")
    live, _, on_download = progress(enabled=interactive(args), status=None)

    def on_bytes(done: int, total: int) -> None:
        if on_download is not None:
            on_download("checking the pack", done, total)

    with live:
        result = install_pack(
            args.lock, venv=Path(args.venv), python=args.python,
            toolkit_prefix=Path(args.toolkit_prefix) if args.toolkit_prefix else None,
            allow_no_gpu=args.allow_no_gpu,
            report_dir=Path(args.report) if args.report else None,
            on_bytes=on_bytes, unknown_runfile=args.allow_unknown_runfile,
            on_notice=notice)
    if args.json:
        print_json("install-pack", result.to_dict())
    else:
        say(args, render_pack_install(result))
    return result.exit_code
