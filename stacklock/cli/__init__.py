"""The command line: parse arguments, make one library call, print, exit.

This package is the only code that prints. Each verb is one function in its own
module (``stacklock.cli.resolve.resolve``, ...), imported only when that verb runs,
so ``stacklock --help`` loads argparse and nothing else. Every ``StacklockError``
becomes one line on stderr and its exit code; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import sys

from stacklock.errors import StacklockError

# not typing.TYPE_CHECKING: --help should not pay for importing typing
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager
    from types import ModuleType
    from typing import NoReturn

    from stacklock.install.early import HeadStart

__all__ = ["main", "run"]


def _verb(path: str) -> Callable[..., int]:
    """The function ``module:function`` under ``stacklock.cli``, imported now."""
    import importlib

    module_name, _, function = path.partition(":")
    module: ModuleType = importlib.import_module(f"stacklock.cli.{module_name}")
    found: Callable[..., int] = getattr(module, function)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        with _head_start(argv) as head:
            from stacklock.cli.parser import build_parser

            args = build_parser(argv).parse_args(argv)
            args.head = head  # only install's, started before argparse loaded
            return _verb(args.verb)(args)
    except StacklockError as exc:
        print(f"stacklock: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("stacklock: interrupted; nothing was half-written", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `stacklock cuda list | head`: the reader has left
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def run() -> NoReturn:
    """The ``stacklock`` command: :func:`main`, then the exit. When the run is
    over (output flushed, no thread but this one), the interpreter is left
    without tearing down every module and object it loaded, which costs a short
    command about 10 ms here; anything still running exits normally."""
    code = main()
    threads = sys.modules.get("threading")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a reader gone after the last line: the normal exit's care
        sys.exit(code)
    if threads is None or threads.active_count() == 1:
        import os

        os._exit(code)
    sys.exit(code)


def _head_start(argv: list[str]) -> AbstractContextManager[HeadStart | None]:
    """uv's head start when the line is ``stacklock install ...``
    (:mod:`stacklock.install.early`), else nothing."""
    if argv[:1] == ["install"] and not {"-h", "--help"} & set(argv):
        from stacklock.cli.install import head_start_for

        return head_start_for(argv[1:])
    from contextlib import nullcontext

    return nullcontext(None)
