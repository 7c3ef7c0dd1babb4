"""The command line: parse arguments, make one library call, print, exit.

This package is the only code that prints. Each verb is one function in its own
module (``stacklock.cli.resolve.resolve``, ...), imported only when that verb runs,
and that function imports the library code it calls, so ``stacklock --help``
loads argparse and the parser, and no verb. Every ``StacklockError`` becomes one
line on stderr and its exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import importlib
import sys
from typing import TYPE_CHECKING, NoReturn

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["main", "run"]

# the disk or a quota has no room; EFBIG: the file system (or `ulimit -f`) takes
# no file that large
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _verb(path: str) -> Callable[..., int]:
    """The function ``module:function`` under ``stacklock.cli``, imported now."""
    module_name, _, function = path.partition(":")
    module = importlib.import_module(f"stacklock.cli.{module_name}")
    found: Callable[..., int] = getattr(module, function)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    from stacklock.cli.parser import build_parser

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(argv).parse_args(argv)
        args.verbosity = args.verbosity or args.loudness  # after the verb, or before
        if args.verbosity > 1:  # -vv: each request, each page read
            import logging

            logging.basicConfig(format="stacklock: %(name)s: %(message)s")
            logging.getLogger("stacklock").setLevel(logging.DEBUG)
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
    except OSError as exc:  # the machine's, not the input's: a full or read-only disk
        print(f"stacklock: error: {_os_error(exc)}", file=sys.stderr)
        return 1 if exc.errno in _FULL else 2


def _temporary_folder() -> str:
    import tempfile

    return tempfile.gettempdir()


def _os_error(exc: OSError) -> str:
    """One line for an error the operating system raised: the file, the cause,
    and what to try."""
    where = f"{exc.filename}: " if exc.filename else ""
    cause = exc.strerror or str(exc)
    room = ("a file system that takes larger files" if exc.errno == errno.EFBIG
            else "free space there")
    if exc.errno in _FULL and exc.filename is not None and \
            exc.filename == _temporary_folder():  # the check's kept bytes
        hint = f"{room}, or point TMPDIR elsewhere"
    elif exc.errno in _FULL:
        hint = f"{room}, or point STACKLOCK_CACHE_DIR / --venv elsewhere"
    else:
        hint = ("check the path's permissions and that its file system is writable, "
                "or point STACKLOCK_CACHE_DIR elsewhere")
    return f"{where}{cause} (try: {hint})"


def run() -> NoReturn:
    """The ``stacklock`` command. Interrupted, once the main thread has unwound
    (each file published whole or not at all) and said so, it ends by SIGINT
    itself, as POSIX asks of a program that catches it: a shell sees 130 and
    stops a loop around the command (a child that exits 130 on its own is taken
    to have handled the interrupt, and the loop goes on), and worker threads
    still waiting on a server are not joined for their timeouts."""
    code = main()
    if code == 130:
        _end_by_sigint()
    sys.exit(code)  # also where SIGINT is blocked and the kill did not end it


def _end_by_sigint() -> None:
    import os
    import signal

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader that has left
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
