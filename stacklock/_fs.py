"""Small filesystem helpers: atomic replacement, file digests, the cache location.

Every file stacklock writes for a user (locks, reports, snapshots, cache entries)
goes through :func:`atomic_write_bytes`, so a crash or Ctrl-C never leaves half a file.
"""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.errors import OutputError

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "atomic_write_bytes",
    "atomic_write_chunks",
    "atomic_write_text",
    "cache_dir",
    "check_writable",
    "file_digest",
    "publish_bytes",
]


def cache_dir() -> Path:
    """``$STACKLOCK_CACHE_DIR``, else ``$XDG_CACHE_HOME/stacklock``, else ~/.cache."""
    explicit = os.environ.get("STACKLOCK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "stacklock"


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, durable: bool = True,
    shared: bool = False,
) -> Path:
    """Write ``data`` to a temporary file beside ``path``, fsync, then rename.

    ``durable=False`` skips the fsync: for cache entries, whose readers check
    what they read (length, sha256, format) and fetch again after a crash.
    ``shared``: the file is for others too (a lock, a report, an archive's
    pages, a venv's activation script), so it appears with the modes any other
    tool gives a new file (:func:`shared_mode`: 0644 under the usual umask);
    else it is its owner's alone (0600)."""
    return atomic_write_chunks(path, (data,), durable=durable, shared=shared)


def atomic_write_chunks(
    path: str | os.PathLike[str], chunks: Iterable[bytes], *, durable: bool = True,
    shared: bool = False,
) -> Path:
    """:func:`atomic_write_bytes` of the chunks one after another, without
    joining them first (a page body runs to megabytes; its header is a line).

    A cold resolution writes hundreds of cache entries, so this costs few system
    calls: the folder is made only when the first open says it is missing, and
    the temporary name is the process id and a counter (unique among the
    writers of one process; a name left by a crashed one is skipped)."""
    target = Path(path)
    fd, tmp = _open_temp_beside(os.fspath(target))
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
        if shared:
            os.fchmod(fd, shared_mode())
        if durable:
            os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno and exc.filename is None:
            exc.filename = os.fspath(target)  # a full disk's line names the file
        raise
    return target


@functools.cache  # the umask is the process's; read once
def shared_mode() -> int:
    """0666 less the process's umask, as open() makes a new file: read from
    /proc/self/status (Linux), since os.umask can only be read by changing it,
    which would change it for this process's other threads meanwhile; 0644
    where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
_TEMP_COUNTER = itertools.count()


def _open_temp_beside(target: str) -> tuple[int, str]:
    """A new file ``.<name>.<pid>.<n>.tmp`` beside ``target`` (mode 0600, as
    mkstemp makes it), its folder made if missing."""
    folder, name = os.path.split(target)
    made = False
    while True:
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{next(_TEMP_COUNTER)}.tmp")
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o600), tmp
        except FileExistsError:
            continue
        except FileNotFoundError:
            if made:
                raise
            os.makedirs(folder or ".", exist_ok=True)
            made = True


def publish_bytes(path: str | os.PathLike[str], data: bytes, *, what: str) -> Path:
    """Atomically write a file meant to be committed and shared (a lock), with
    the modes any new file gets (:func:`shared_mode`). OutputError names
    ``what`` and the path."""
    try:
        written = atomic_write_bytes(path, data, shared=True)
    except OSError as exc:
        raise OutputError(f"cannot write {what} ({exc.strerror or exc})",
                          path=Path(path), hint="choose a writable file path"
                          ) from None
    return written


def check_writable(path: str | os.PathLike[str], *, example: str) -> Path:
    """Raise OutputError unless :func:`atomic_write_bytes` can write ``path``:
    asked before work whose result would be lost (a resolution, a download).
    ``example`` is a file name to suggest when ``path`` is a directory.

    Probes by creating (and removing) a temporary file beside ``path``: access
    bits do not tell, for root or on read-only and pseudo file systems."""
    target = Path(path)
    if target.is_dir():
        raise OutputError("is a directory", path=target,
                          hint=f"name a file in it, e.g. {target / example}")
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"{folder} is a file, not a directory", path=target,
                          hint="choose a path whose parents are directories")
    # a name of this process's own, made with O_EXCL (tempfile and the random
    # module it loads cost an unchanged update or resolve --check ~4 ms)
    for n in itertools.count():
        probe = folder / f".{target.name}.{os.getpid()}.{n}.probe"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(f"cannot write in {folder} ({exc.strerror})",
                              path=target, hint="choose a writable directory"
                              ) from None
        os.close(fd)
        os.unlink(probe)
        return target
    raise AssertionError("unreachable")


def atomic_write_text(path: str | os.PathLike[str], text: str, *,
                      shared: bool = False) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), shared=shared)


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes, read in chunks (wheels run to gigabytes)."""
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, algorithm).hexdigest()


