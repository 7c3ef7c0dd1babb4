"""Cache entries are written without fsync, so their readers must catch a torn
file: a page body whose bytes no longer match the sha256 in its header line is
not served; locks and other records are still fsynced."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

from stacklock._fs import atomic_write_bytes, atomic_write_chunks
from stacklock.index.cache import PageCache

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

URL = "https://pypi.org/simple/six/"


def _write(cache: PageCache, body: bytes) -> None:
    meta = {"content-type": "text/html", "sha256": hashlib.sha256(body).hexdigest(),
            "etag": '"abc"', "last-modified": None}
    cache.write_page(URL, URL, body, meta)


def test_fsync_only_for_durable_writes(tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    atomic_write_bytes(tmp_path / "lock.toml", b"x")
    assert len(synced) == 1
    atomic_write_bytes(tmp_path / "entry", b"y", durable=False)
    assert len(synced) == 1
    assert (tmp_path / "entry").read_bytes() == b"y"
    _write(PageCache(tmp_path / "pages"), b"<a href='six-1.0.tar.gz'>six</a>")
    assert len(synced) == 1  # the page cache does not fsync


def test_a_torn_page_body_is_not_served(tmp_path: Path) -> None:
    cache = PageCache(tmp_path / "pages")
    body = b"<html><a href='six-1.17.0-py2.py3-none-any.whl'>six</a></html>"
    _write(cache, body)
    found = cache.read_page(URL)
    assert found is not None and found[0] == body
    path = cache.page_path(URL)
    raw = path.read_bytes()
    path.write_bytes(raw[:-5] + b"\x00" * 5)  # same length, zeros at the end
    assert cache.read_page(URL) is None


def test_chunks_land_whole_in_a_new_folder_and_leave_no_temporary(
        tmp_path: Path) -> None:
    target = tmp_path / "ab" / "cd" / "entry.page"
    atomic_write_chunks(target, (b"header\n", b"x" * 300_000, b""), durable=False)
    assert target.read_bytes() == b"header\n" + b"x" * 300_000
    assert target.stat().st_mode & 0o777 == 0o600  # as mkstemp made them
    atomic_write_chunks(target, (b"again",), durable=False)  # replaced whole
    assert target.read_bytes() == b"again"
    assert [p.name for p in target.parent.iterdir()] == ["entry.page"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "entry"
    atomic_write_bytes(target, b"old", durable=False)

    def chunks():
        yield b"new"
        raise OSError("disk full")

    try:
        atomic_write_chunks(target, chunks(), durable=False)
    except OSError as exc:
        assert "disk full" in str(exc)
    else:
        raise AssertionError("the write should have failed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_a_write_the_system_refuses_names_the_file(tmp_path):
    """A write past the file-size limit (the kernel's EFBIG, as a full disk's
    ENOSPC, carries no file name) is raised naming the file it was for, and
    leaves no temporary file behind."""
    import subprocess
    import sys

    target = tmp_path / "cache" / "entry.json.gz"
    script = (
        "import resource, signal, sys\n"
        "from stacklock._fs import atomic_write_bytes\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    atomic_write_bytes(sys.argv[1], b'x' * 65536, durable=False)\n"
        "except OSError as exc:\n"
        "    print(exc.errno, exc.filename)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(target)],
                          capture_output=True, text=True, check=True)
    errno_, name = done.stdout.split()
    assert int(errno_) == 27  # EFBIG
    assert name == str(target)
    assert list(target.parent.iterdir()) == []  # the temporary file is gone


def test_a_shared_file_gets_the_modes_the_umask_gives_a_new_file(
        tmp_path: Path) -> None:
    """shared=True: 0666 less the umask, read without changing it (other
    threads may be writing), the file never seen with other modes."""
    import subprocess
    import sys

    code = ("import sys; from stacklock._fs import atomic_write_bytes as w; "
            "print(oct(w(sys.argv[1], b'x', shared=True).stat().st_mode & 0o777))")
    for umask, mode in ((0o022, "0o644"), (0o027, "0o640"), (0o077, "0o600"),
                        (0o002, "0o664")):
        made = subprocess.run(
            ["sh", "-c", f'umask {umask:o} && exec "$0" -c "$1" "$2"',
             sys.executable, code, str(tmp_path / f"f{umask:o}")],
            capture_output=True, text=True, check=True)
        assert made.stdout.strip() == mode, (oct(umask), made.stdout, made.stderr)
