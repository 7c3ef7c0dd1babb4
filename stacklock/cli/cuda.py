"""``stacklock cuda list|show|check-driver|refresh``: CUDA toolkit releases, the
local driver, and the catalog checked against NVIDIA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.cli.output import print_json, say
from stacklock.errors import CudaError, StacklockError

if TYPE_CHECKING:
    import argparse

__all__ = ["cuda_check_driver", "cuda_list", "cuda_refresh", "cuda_show"]


def _platform(args: argparse.Namespace) -> str:
    """``--platform`` checked before use, the error naming the flag."""
    from stacklock.cuda.catalog import platform_for_target

    try:
        return platform_for_target(args.platform)
    except CudaError as exc:
        raise StacklockError(f"--platform: {exc.message}", hint=exc.hint) from None


def cuda_list(args: argparse.Namespace) -> int:
    from stacklock.cuda.catalog import load_catalog, render_releases

    _platform(args)
    catalog = load_catalog()
    if args.json:
        print_json("cuda-list", {"platform": args.platform, "releases": [
            r.to_dict(args.platform) for r in catalog.releases]})
    else:
        say(args, render_releases(catalog, args.platform))
    return 0


def cuda_show(args: argparse.Namespace) -> int:
    from stacklock.cuda.catalog import load_catalog, render_release

    _platform(args)
    catalog = load_catalog()
    # a series ("13.0") shows each of its releases, newest first
    series = [r for r in catalog.releases
              if r.major_minor == args.cuda_version]
    releases = series or [catalog.get(args.cuda_version)]
    if args.json:
        print_json("cuda-show", {"platform": args.platform, "releases": [
            r.to_dict(args.platform) for r in releases]})
    else:
        say(args, "\n\n".join(render_release(r, args.platform) for r in releases))
    return 0


def cuda_check_driver(args: argparse.Namespace) -> int:
    from stacklock.cuda.catalog import load_catalog
    from stacklock.cuda.driver import (
        check_driver,
        lock_cuda,
        read_driver,
        render_driver_report,
    )
    from stacklock.errors import NoDriverError
    from stacklock.lock import load_lock

    toolkit, wheels = (lock_cuda(load_lock(Path(args.lock))) if args.lock
                       else (None, {}))
    try:
        driver, missing = read_driver(), None
    except NoDriverError as exc:  # the answer is "no": nothing here runs it
        driver, missing = None, str(exc)
    report = check_driver(load_catalog(), driver, missing=missing,
                          toolkit=args.cuda_version or toolkit, wheels=wheels)
    if args.json:
        print_json("cuda-check-driver", report.to_dict())
    else:
        say(args, render_driver_report(report))
    return 0 if report.ok else 1


def cuda_refresh(args: argparse.Namespace) -> int:
    from stacklock._fs import atomic_write_bytes
    from stacklock.cuda.catalog import load_catalog
    from stacklock.cuda.refresh import refresh_catalog, render_refresh
    from stacklock.http import make_http_client

    with make_http_client() as http:
        report = refresh_catalog(http, load_catalog(), versions=args.only or None)
    if args.write:
        data = json.dumps(report.catalog.to_dict(), indent=1) + "\n"
        atomic_write_bytes(Path(args.write), data.encode(), shared=True)
    if args.json:
        print_json("cuda-refresh", report.to_dict())
    else:
        say(args, render_refresh(report))
    return 0
