"""The command line: parse arguments, make one library call, print, exit.

This package is the only code that prints. Each verb is one function in its own
module (``stacklock.cli.resolve.resolve``, ...), imported only when that verb runs,
and that function imports the library code it calls, so ``stacklock --help``
loads argparse and the parser, and no verb. Every ``StacklockError`` becomes one
line on stderr and its exit code (with ``--json``, also an error document on
stdout: ``stacklock.error/1``); anything else is a bug and keeps its traceback.
SIGTERM and SIGHUP end a command as Ctrl-C does (:class:`Terminated`).
"""

from __future__ import annotations

import errno
import importlib
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from stacklock.errors import StacklockError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType

__all__ = ["Terminated", "main", "run"]

# the disk or a quota has no room; EFBIG: the file system (or `ulimit -f`) takes
# no file that large
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# what each stopping signal says; the exit status is 128 + its number
_STOPPED: dict[int, str] = {signal.SIGINT: "interrupted",
                            signal.SIGTERM: "terminated (SIGTERM)",
                            signal.SIGHUP: "hung up (SIGHUP)"}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a CI job cancelled, ``timeout``, a closed terminal),
    raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that every
    cleanup Ctrl-C runs runs for them too: uv stopped, a new generation
    removed, the old venv left current, nothing half-written."""

    def __init__(self, signo: int) -> None:
        super().__init__(signo)
        self.signo = signo


def _verb(path: str) -> Callable[..., int]:
    """The function ``module:function`` under ``stacklock.cli``, imported now."""
    module_name, _, function = path.partition(":")
    module = importlib.import_module(f"stacklock.cli.{module_name}")
    found: Callable[..., int] = getattr(module, function)
    return found


def _wants_json(argv: Sequence[str]) -> bool:
    """``--json`` (or ``--format json``) among the options, not in a command
    after ``--`` (``bisect ... -- CMD``)."""
    head = list(argv[:argv.index("--")] if "--" in argv else argv)
    pairs = zip(head, [*head[1:], ""], strict=True)
    return "--json" in head or "--format=json" in head or \
        ("--format", "json") in pairs


def _fail(code: int, line: str, *, as_json: bool, kind: str, message: str,
          hint: str | None, **more: Any) -> int:
    """One line on stderr; with ``--json`` the error document on stdout too."""
    print(f"stacklock: {line}", file=sys.stderr)
    if as_json:
        from stacklock.jsonout import json_document

        error = {"type": kind, "message": message, "hint": hint, **more}
        sys.stdout.write(json_document("error", {"error": error, "exit_code": code}))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    from stacklock.cli.parser import build_parser

    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = _wants_json(argv)
    try:
        args = build_parser(argv).parse_args(argv)
        args.verbosity = args.verbosity or args.loudness  # after the verb, or before
        if args.verbosity > 1:  # -vv: each request, each page read
            import logging

            logging.basicConfig(format="stacklock: %(name)s: %(message)s")
            logging.getLogger("stacklock").setLevel(logging.DEBUG)
        return _verb(args.verb)(args)
    except StacklockError as exc:
        return _fail(exc.exit_code, f"error: {exc}", as_json=as_json,
                     kind=type(exc).__name__, message=exc.message, hint=exc.hint)
    except KeyboardInterrupt as exc:  # Ctrl-C, or Terminated
        signo = exc.signo if isinstance(exc, Terminated) else signal.SIGINT
        said = f"{_STOPPED[signo]}; nothing was half-written"
        return _fail(128 + signo, said, as_json=as_json, kind="Interrupted",
                     message=said, hint=None, signal=signal.Signals(signo).name)
    except BrokenPipeError:  # `stacklock cuda list | head`: the reader has left
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # the machine's, not the input's: a full or read-only disk
        message, hint = _os_error(exc)
        return _fail(1 if exc.errno in _FULL else 2, f"error: {message} (try: {hint})",
                     as_json=as_json, kind="OSError", message=message, hint=hint)


def _temporary_folder() -> str:
    import tempfile

    return tempfile.gettempdir()


def _os_error(exc: OSError) -> tuple[str, str]:
    """What the operating system refused, and what to try: the file, the cause,
    the advice."""
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
    return f"{where}{cause}", hint


def _raise_terminated(signo: int, frame: FrameType | None) -> None:
    """The handler of SIGTERM and SIGHUP: the first one unwinds the main thread;
    one more while it unwinds is not raised again, so the cleanup finishes."""
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)
    raise Terminated(signo)


def _catch_stops() -> None:
    """SIGTERM and SIGHUP end a command as Ctrl-C does; a signal the caller
    ignores (``nohup``: SIGHUP) stays ignored."""
    for stop in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(stop) is not signal.SIG_IGN:
            signal.signal(stop, _raise_terminated)


def run() -> NoReturn:
    """The ``stacklock`` command. Interrupted (Ctrl-C, SIGTERM, SIGHUP), once the
    main thread has unwound (each file published whole or not at all) and said
    so, it ends by that signal itself, as POSIX asks of a program that catches
    it: a shell sees 128 + its number (130, 143, 129) and stops a loop around
    the command (a child that exits 130 on its own is taken to have handled the
    interrupt, and the loop goes on), and worker threads still waiting on a
    server are not joined for their timeouts."""
    _catch_stops()
    code = main()
    if code - 128 in _STOPPED:
        _end_by_signal(code - 128)
    sys.exit(code)  # also where the signal is blocked and the kill did not end it


def _end_by_signal(signo: int) -> None:
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader that has left
            pass
    signal.signal(signo, signal.SIG_DFL)
    os.kill(os.getpid(), signo)
