"""Random access to a remote file through HTTP ``Range`` requests.

:class:`RangeReader` keeps the byte ranges it fetched (a tiny block cache), so the
zip reader (:mod:`stacklock.metadata.remote_zip`) and the sdist and native readers
can ask for overlapping pieces without asking the server twice. Transient failures
are retried by the one policy (:class:`~stacklock.http.Retry`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from stacklock.errors import ZipReadError
from stacklock.http import Retry, get

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

__all__ = ["RANGE_RETRY", "RangeReader"]

RANGE_RETRY = Retry()


class RangeReader:
    """Random access to a remote file through ``Range`` requests, with a cache."""

    def __init__(
        self, http: httpx.Client, url: str, *, on_bytes: Callable[[int], None],
        retry: Retry = RANGE_RETRY,
    ) -> None:
        self._http = http
        self._retry = retry
        self._url = url
        self._on_bytes = on_bytes
        self._segments: list[tuple[int, bytes]] = []
        self.size = 0
        self.tail_start = 0

    def open_tail(self, length: int, *, size_hint: int | None = None) -> bool:
        """Read the last ``length`` bytes; False when the server ignores ``Range``."""
        try:
            result = self._request(f"bytes=-{length}")
        except ZipReadError:
            if size_hint is None or size_hint <= 0:
                raise
            # Some servers refuse suffix ranges; ask for the same bytes explicitly.
            first = max(size_hint - length, 0)
            result = self._request(f"bytes={first}-{size_hint - 1}")
        if result is None:
            return False
        start, body, total = result
        if total is None:
            total = size_hint if size_hint is not None else start + len(body)
        if start + len(body) != total:
            raise ZipReadError(
                f"the tail read ended at {start + len(body)}, not {total}"
            )
        self.size = total
        self.tail_start = start
        self._segments.append((start, body))
        return True

    def open_known(self, size: int) -> None:
        """Take the file as ``size`` bytes long, as an earlier read of the same
        URL found it, without a request (nothing is cached yet)."""
        self.size = size
        self.tail_start = size

    def held(self, offset: int, length: int) -> bytes | None:
        """The ``length`` bytes at ``offset`` when one fetched range holds them
        all, else None; never asks the server."""
        end = min(offset + length, self.size)
        if offset < 0 or offset > end:
            return None
        found = self._cached(offset, end)
        return found if len(found) == end - offset else None

    def read_at(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``, fetching only the part not cached yet."""
        end = min(offset + length, self.size)
        if offset < 0 or offset >= end:
            return b""
        head = self._cached(offset, end)
        lo = offset + len(head)
        while lo < end and (more := self._cached(lo, end)):
            head += more  # the next range fetched starts where this one ends
            lo += len(more)
        if lo == end:
            return head
        tail = b""
        for start, data in self._segments:
            if start <= end - 1 < start + len(data) and start > lo:
                tail = data[: end - start]
        hi = end - len(tail)
        got = self._request(f"bytes={lo}-{hi - 1}")
        if got is None or got[0] != lo or len(got[1]) != hi - lo:
            raise ZipReadError(f"the server did not return bytes {lo}-{hi - 1}")
        self._segments.append((lo, got[1]))
        return head + got[1] + tail

    def fetch(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` straight from the server, not cached:
        for streaming a large member through once."""
        end = min(offset + length, self.size)
        got = self._request(f"bytes={offset}-{end - 1}")
        if got is None or got[0] != offset or len(got[1]) != end - offset:
            raise ZipReadError(f"the server did not return bytes {offset}-{end - 1}")
        return got[1]

    def _cached(self, offset: int, end: int) -> bytes:
        for start, data in self._segments:
            if start <= offset < start + len(data):
                return data[offset - start : end - start]
        return b""

    def _request(self, spec: str) -> tuple[int, bytes, int | None] | None:
        """(start, body, total) of a 206 answer, None for a 200 (Range ignored)."""
        headers = {"Range": spec, "Accept-Encoding": "identity"}
        # a 200 is left unread: the caller downloads the file whole
        response = self._retry.call(lambda _n: get(
            self._http, self._url, headers=headers,
            read_body=lambda status: status == 206))
        if response.status_code == 200:
            return None
        if response.status_code != 416:
            response.raise_for_status()  # 4xx/5xx: an HTTP error
        if response.status_code != 206:
            raise ZipReadError(f"range read {spec} got HTTP {response.status_code}")
        body = response.content
        self._on_bytes(len(body))
        return _check_range(spec, response, body)


def _check_range(
    spec: str, response: httpx.Response, body: bytes
) -> tuple[int, bytes, int | None]:
    value = response.headers.get("content-range", "")
    match = re.fullmatch(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19}|\*)", value.strip())
    if match is None:
        raise ZipReadError(f"range read {spec}: bad Content-Range {value[:80]!r}")
    first, last = int(match.group(1)), int(match.group(2))
    if len(body) != last - first + 1:
        raise ZipReadError(
            f"range read {spec}: got {len(body)} bytes, Content-Range says "
            f"{last - first + 1} (truncated response)"
        )
    total = None if match.group(3) == "*" else int(match.group(3))
    return first, body, total
