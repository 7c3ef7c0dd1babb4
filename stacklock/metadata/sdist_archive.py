"""An sdist's PKG-INFO (and its pyproject.toml, when PKG-INFO cannot be trusted)
read from the index, without downloading the whole sdist.

A ``.tar.gz`` has no directory, so it is read front to back through gzip: one
range request for the first 64 KiB, then, only if PKG-INFO was not in it, the
rest as one streamed range that is closed as soon as PKG-INFO has gone by.
setuptools writes ``<top>/PKG-INFO`` among the first members (found within the
first 8-28 KB of python-nvd3, flask-limiter, requests, deepspeed and flash-attn,
whose sdist is 8.4 MB); hatchling, flit, poetry, maturin and meson-python write
it last, so for those the whole sdist is read (measured with
``scripts/bench_sdist_pkg_info.py``). A ``.zip`` sdist has a central directory
at its end and is read with the wheel's range-read machinery.
"""

from __future__ import annotations

import io
import tarfile
import time
import zipfile
import zlib
from typing import TYPE_CHECKING

import httpx

from stacklock.download import MAX_DOWNLOAD
from stacklock.errors import ZipReadError
from stacklock.http import BodyTooLarge, DeadlineExceeded, Limits, get, header_int
from stacklock.metadata import remote_zip as _remote_zip
from stacklock.metadata.pkg_info import top_member
from stacklock.metadata.ranges import RANGE_RETRY, RangeReader

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from stacklock.http import Retry

__all__ = ["ARCHIVE_ERRORS", "FIRST_READ", "ForwardReader", "read_remote_pkg_info",
           "read_remote_sdist_files"]

FIRST_READ = 64 * 1024
_HEADERS = {"Accept-Encoding": "identity"}
# What a broken archive raises while it is read.
ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError,
                  ZipReadError)


class ForwardReader(io.RawIOBase):
    """A remote file as a forward-only stream: the first ``first`` bytes by one
    range request, the rest by a second, streamed one that is closed early when
    the reader stops. A server that ignores ``Range`` is streamed whole.
    ``on_bytes`` is told how many body bytes came from the network."""

    def __init__(
        self,
        http: httpx.Client,
        url: str,
        *,
        on_bytes: Callable[[int], None],
        first: int = FIRST_READ,
        retry: Retry = RANGE_RETRY,
        keep: bytearray | None = None,
    ) -> None:
        super().__init__()
        self._http = http
        self._retry = retry
        self._keep = keep  # every byte fetched, in order, when given
        self._url = url
        self._on_bytes = on_bytes
        self._first = first
        self._pending = b""
        self._chunks: Iterator[bytes] | None = None
        self._response: httpx.Response | None = None
        self._offset = 0  # bytes fetched so far
        self._total: int | None = None
        self._started = False
        self._limits = Limits.from_env()
        self._opened = time.monotonic()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            chunk = self._next_chunk()
            if chunk is None:
                return 0
            self._pending = chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _next_chunk(self) -> bytes | None:
        if not self._started:
            self._started = True
            return self._first_range()
        if self._chunks is None:
            if self._total is not None and self._offset >= self._total:
                return None
            self._open(f"bytes={self._offset}-")
            assert self._chunks is not None
        chunk = next(self._chunks, None)
        if chunk is None:
            self._finish()
            return None
        self._offset += len(chunk)
        self._check_limits()
        self._on_bytes(len(chunk))
        if self._keep is not None:
            self._keep += chunk
        return chunk

    def _first_range(self) -> bytes | None:
        headers = {**_HEADERS, "Range": f"bytes=0-{self._first - 1}"}
        response = self._retry.call(lambda _n: get(self._http, self._url,
                                                   headers=headers))
        if response.status_code == 416:  # an empty file
            return None
        response.raise_for_status()
        body = response.content
        self._on_bytes(len(body))
        if self._keep is not None:
            self._keep += body
        self._offset = len(body)
        if response.status_code == 200:  # Range ignored: that was the whole file
            self._total = len(body)
        else:
            self._total = _total_of(response)
        return body

    def _check_limits(self) -> None:
        """The stream's bounds: its declared size (else the cap of a download)
        and the request deadline plus the bytes read at 256 KiB/s."""
        cap = self._total if self._total is not None else MAX_DOWNLOAD
        if self._offset > cap:
            raise BodyTooLarge(f"the sdist passed {cap} bytes",
                               request=httpx.Request("GET", self._url))
        allowed = self._limits.deadline + self._offset / (256 * 1024)
        if time.monotonic() - self._opened > allowed:
            raise DeadlineExceeded(f"still reading the sdist after {allowed:.0f} s",
                                   request=httpx.Request("GET", self._url))

    def _open(self, spec: str) -> None:
        self._opened = time.monotonic()
        request = self._http.build_request(
            "GET", self._url, headers={**_HEADERS, "Range": spec})
        response = self._http.send(request, stream=True)
        if response.status_code != 206:
            response.close()
            if response.status_code == 416:
                self._chunks = iter(())
                return
            response.raise_for_status()
            raise httpx.HTTPStatusError(
                f"range read {spec} got HTTP {response.status_code}",
                request=request, response=response)
        self._response = response
        self._chunks = response.iter_bytes()  # identity was asked for

    def _finish(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None
        self._total = self._offset

    def close(self) -> None:
        self._finish()
        super().close()


def _total_of(response: httpx.Response) -> int | None:
    value = response.headers.get("content-range", "")
    _unit, _, rest = value.partition(" ")
    return header_int(rest.rpartition("/")[2])


def read_remote_pkg_info(
    http: httpx.Client,
    url: str,
    filename: str,
    *,
    on_bytes: Callable[[int], None],
    size_hint: int | None = None,
    first: int = FIRST_READ,
    retry: Retry = RANGE_RETRY,
    keep: bytearray | None = None,
) -> bytes | None:
    """The sdist's ``<top>/PKG-INFO``; None when it has none (see
    :func:`read_remote_sdist_files`)."""
    return read_remote_sdist_files(
        http, url, filename, on_bytes=on_bytes, size_hint=size_hint, first=first,
        retry=retry, keep=keep, enough=lambda found: "PKG-INFO" in found,
    ).get("PKG-INFO")


def read_remote_sdist_files(
    http: httpx.Client,
    url: str,
    filename: str,
    *,
    on_bytes: Callable[[int], None],
    enough: Callable[[Mapping[str, bytes]], bool],
    size_hint: int | None = None,
    first: int = FIRST_READ,
    retry: Retry = RANGE_RETRY,
    keep: bytearray | None = None,
) -> dict[str, bytes]:
    """The sdist's top ``PKG-INFO`` and ``pyproject.toml`` found before
    ``enough`` says so (or the archive ends), by base name. ``first`` is the
    size of the first range read; ``keep`` receives the bytes of a .tar.gz read
    from its start (the whole sdist when it was read to the end). Raises
    ``httpx.HTTPError``, ``tarfile.TarError``/``zlib.error``/``EOFError`` for a
    broken archive, and :class:`stacklock.errors.ZipReadError`."""
    found: dict[str, bytes] = {}
    if filename.endswith(".zip"):
        for base in ("PKG-INFO", "pyproject.toml"):
            raw = _zip_member(http, url, base, on_bytes=on_bytes,
                              size_hint=size_hint)
            if raw is not None:
                found[base] = raw
            if enough(found):
                break
        return found
    with ForwardReader(http, url, on_bytes=on_bytes, first=first, retry=retry,
                       keep=keep) as raw_stream, tarfile.open(
        fileobj=raw_stream, mode="r|gz"
    ) as archive:
        for member in archive:
            top = top_member(member.name) if member.isfile() else None
            if top is None or top in found:
                continue
            extracted = archive.extractfile(member)
            if extracted is not None:
                found[top] = extracted.read()
            if enough(found):
                break
    return found


def _zip_member(
    http: httpx.Client,
    url: str,
    base: str,
    *,
    on_bytes: Callable[[int], None],
    size_hint: int | None,
) -> bytes | None:
    reader = RangeReader(http, url, on_bytes=on_bytes)
    if not reader.open_tail(FIRST_READ, size_hint=size_hint):
        response = RANGE_RETRY.call(lambda _n: get(http, url, headers=_HEADERS))
        response.raise_for_status()
        on_bytes(len(response.content))
        with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
            name = _choose(archive.namelist(), base)
            return archive.read(name) if name is not None else None
    return _remote_zip.read_member(reader, lambda names: _choose(names, base))


def _choose(names: list[str], base: str) -> str | None:
    found = sorted(n for n in names if top_member(n) == base)
    return found[0] if found else None
