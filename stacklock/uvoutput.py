"""What uv says: its output, captured and read one bounded way.

stacklock reads uv's words in a few places: the interpreter ``uv python find``
names (install, sdist builds), ``uv pip check``'s report (validate), a failed
``uv pip sync``'s log (a hash mismatch), the URLs uv's client fetched (install's
``fetched:`` line), and the last line of a failed command (the pack's bootstrap).
Every one of them goes through here:

- :func:`capture` runs a short command and keeps at most :data:`MAX_KEPT` bytes of
  each stream (the first half and the last half; what is between is counted, not
  kept), drained as it comes so a command printing gigabytes neither fills memory
  nor blocks on a full pipe;
- :func:`read_log` reads the last :data:`MAX_LOG` bytes of a step's log (a regular
  file only);
- :func:`text_of` decodes what was kept (UTF-8, anything else replaced), drops
  terminal escapes and control characters (a NUL, a bell), and :func:`lines_of`
  gives its non-empty lines, each at most :data:`MAX_LINE` characters.

uv prints no JSON that stacklock parses; its text is never parsed as JSON or TOML.
The same reading serves the other programs a runner captures (git, an
interpreter's answer). Standard library only: every pack's bootstrap carries
this module.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacklock.bounded import open_regular

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import BinaryIO

__all__ = ["MAX_KEPT", "MAX_LINE", "MAX_LOG", "Captured", "capture", "last_line",
           "lines_of", "read_log", "text_of"]

MAX_KEPT = 1 << 20  # bytes of a stream kept: uv's answers are a few lines
MAX_LOG = 16 << 20  # bytes of a log read: a few lines a file of a GPU stack
MAX_LINE = 1000  # characters of a line kept
_CHUNK = 1 << 16
# a terminal's escape sequences (CSI, OSC, or ESC and one character), none of
# them reaching past the end of its line
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|"
                     r"[^\n])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True, kw_only=True)
class Captured:
    """A command's exit code and what it said (decoded by :func:`text_of`);
    ``dropped``: bytes of its output not kept. rc 127: the program is missing,
    or ran past its time (``timed_out``: it was killed)."""

    rc: int
    stdout: str
    stderr: str
    dropped: int = 0
    timed_out: bool = False


class _Kept:
    """The first and the last ``half`` bytes of a stream; what is between
    counted in ``dropped``."""

    def __init__(self, half: int) -> None:
        self.half = half
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail_size - len(self.tail[0]) >= self.half:
            self.tail_size -= len(self.tail[0])
            self.dropped += len(self.tail.popleft())

    def value(self) -> bytes:
        tail = b"".join(self.tail)
        cut = max(len(tail) - self.half, 0)
        self.dropped += cut
        middle = (f"\n[... {self.dropped:,} bytes not kept ...]\n".encode()
                  if self.dropped else b"")
        return bytes(self.head) + middle + tail[cut:]


def _drain(stream: BinaryIO, kept: _Kept) -> None:
    fd = stream.fileno()
    while chunk := os.read(fd, _CHUNK):
        kept.add(chunk)


def capture(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            timeout: float = 60.0, limit: int = MAX_KEPT) -> Captured:
    """Run ``argv`` (stdin closed) and keep at most ``limit`` bytes of each of
    its streams; a missing program, or one past ``timeout`` (then killed), is
    rc 127 with nothing said."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=None if env is None else dict(env))
    except OSError:
        return Captured(rc=127, stdout="", stderr="")
    assert proc.stdout is not None and proc.stderr is not None
    kept = (_Kept(limit // 2), _Kept(limit // 2))
    readers = [threading.Thread(target=_drain, args=(stream, k), daemon=True)
               for stream, k in zip((proc.stdout, proc.stderr), kept, strict=True)]
    for reader in readers:
        reader.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = None
    for reader in readers:  # a child it left holding the pipe: not waited for
        reader.join(timeout=5)
    if rc is None:
        return Captured(rc=127, stdout="", stderr="", timed_out=True)
    if not any(reader.is_alive() for reader in readers):
        proc.stdout.close()
        proc.stderr.close()
    out, err = (k.value() for k in kept)
    return Captured(rc=rc, stdout=text_of(out), stderr=text_of(err),
                    dropped=kept[0].dropped + kept[1].dropped)


def read_log(path: str | os.PathLike[str], *, limit: int = MAX_LOG) -> str:
    """The text of the last ``limit`` bytes of the log at ``path`` (a regular
    file; a line cut at the start is dropped). Raises OSError as ``open`` does,
    and for what is not a regular file."""
    with open(path, "rb", opener=open_regular) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            fh.seek(size - limit)
            data = fh.read(limit)
            data = data[data.find(b"\n") + 1:]
        else:
            data = fh.read(limit)
    return text_of(data)


def text_of(data: bytes) -> str:
    """``data`` as text: UTF-8 (anything else replaced), without terminal
    escapes or control characters but tab and newline (a carriage return
    ends a line)."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    if "\x1b" in text:
        text = _ESCAPE.sub("", text)
    return _CONTROL.sub("", text)


def lines_of(text: str) -> list[str]:
    """The non-empty lines of ``text``, stripped, each at most
    :data:`MAX_LINE` characters (then its length is said)."""
    out = []
    for line in text.split("\n"):
        line = line.strip()
        if len(line) > MAX_LINE:
            line = f"{line[:MAX_LINE]}... ({len(line):,} characters)"
        if line:
            out.append(line)
    return out


def last_line(text: str) -> str | None:
    """The last non-empty line of ``text`` (shortened as :func:`lines_of`
    does), None when there is none."""
    last = text.rstrip().rpartition("\n")[2]
    lines = lines_of(last)
    return lines[-1] if lines else None
