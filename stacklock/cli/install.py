"""``stacklock install``: a lock into a venv (wheels through uv) and its toolkit;
``--rollback`` restores the previous venv.

uv gets a head start (:mod:`stacklock.install.early`) before argparse and the
rest of install are loaded: :func:`stacklock.cli.main` asks :func:`head_start_for`
first, and this module imports everything heavy inside functions.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from stacklock.errors import StacklockError

TYPE_CHECKING = False  # not typing's: loaded before uv's head start

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from stacklock.install.early import HeadStart

__all__ = ["head_start_for", "install"]


# install's options as the head start reads them before argparse is loaded: the
# exact spellings only; anything else (an abbreviation, --dry-run, --rollback,
# --help) gets no head start, and the plan's own check catches a misreading
_VALUED = frozenset({"--venv", "--python", "--toolkit-prefix", "--report"})
_FLAGS = frozenset({"--no-toolkit", "--allow-no-gpu", "--link-cuda",
                    "--no-validate", "--json"})


def _early_args(argv: Sequence[str]) -> dict[str, str] | None:
    """``lock``, ``--venv`` and ``--python`` of ``stacklock install ARGV``, or
    None when the line is anything but plain."""
    found: dict[str, str] = {}
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if name in _VALUED:
            if not eq:
                if not rest or rest[0].startswith("-"):
                    return None
                value = rest.pop(0)
            if name in found or not value:
                return None
            found[name] = value
        elif arg in _FLAGS:
            continue
        elif arg.startswith("-") or "lock" in found:
            return None
        else:
            found["lock"] = arg
    return found if "lock" in found else None


def head_start_for(argv: Sequence[str]) -> AbstractContextManager[HeadStart | None]:
    """uv's head start for ``stacklock install ARGV`` (see
    :mod:`stacklock.install.early`), begun before argparse is loaded."""
    early = _early_args(argv)
    if early is None:
        return nullcontext(None)
    from stacklock._fs import cache_dir
    from stacklock.install.early import head_start

    return head_start(Path(early["lock"]), venv=Path(early.get("--venv", ".venv")),
                      python=early.get("--python"), cache=cache_dir())


def install(args: argparse.Namespace) -> int:
    """``args.head`` is the head start :func:`head_start_for` began, if any."""
    if args.rollback:
        from stacklock.cli.output import print_json
        from stacklock.install import render_rollback, rollback_install

        back = rollback_install(Path(args.venv))
        print_json(back.to_dict()) if args.json else print(render_rollback(back))
        return 0
    if args.lock is None:
        raise StacklockError("install needs a LOCK", hint="stacklock install LOCK")
    head: HeadStart | None = getattr(args, "head", None)
    if head is None and _is_pack(args.lock):
        return _pack(args)
    return _install(args, head)


def _is_pack(path: str) -> bool:
    from stacklock.pack import is_pack

    return is_pack(path)


def _pack(args: argparse.Namespace) -> int:
    from stacklock.cli.pack import install_from_pack

    return install_from_pack(args)


def _install(args: argparse.Namespace, head: HeadStart | None) -> int:
    from stacklock.cli.output import print_json, progress
    from stacklock.install import (
        DEFAULT_CUDA_LINK,
        install_lock,
        render_install,
    )

    live, _, on_download = progress(
        enabled=sys.stderr.isatty() and not args.json, status=None)
    with live:
        result = install_lock(
            Path(args.lock),
            venv=Path(args.venv),
            python=args.python or (head.python if head else None),
            toolkit_prefix=Path(args.toolkit_prefix) if args.toolkit_prefix else None,
            no_toolkit=args.no_toolkit,
            dry_run=args.dry_run,
            allow_no_gpu=args.allow_no_gpu,
            link_cuda_at=DEFAULT_CUDA_LINK if args.link_cuda else None,
            validate=not args.no_validate,
            report_dir=Path(args.report) if args.report else None,
            on_download=on_download,
            head=head,
        )
    print_json(result.to_dict()) if args.json else print(render_install(result))
    return 0 if result.ok else 1
