"""Answering HTTP range requests the way a real file server does."""

from __future__ import annotations

import re

import httpx


def range_response(request: httpx.Request, data: bytes) -> httpx.Response:
    """206 for ``bytes=a-``, ``a-b`` and ``-n``; 416 past the end; 200 with the
    whole body without ``Range``; a HEAD gets the length and ``Accept-Ranges``."""
    if request.method == "HEAD":
        return httpx.Response(200, headers={"content-length": str(len(data)),
                                            "accept-ranges": "bytes"})
    spec = request.headers.get("range")
    if spec is None:
        return httpx.Response(200, content=data)
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", spec)
    assert match, spec
    first, last = match.groups()
    if first == "":
        start, end = max(len(data) - int(last), 0), len(data) - 1
    else:
        start = int(first)
        end = min(int(last), len(data) - 1) if last else len(data) - 1
    if start >= len(data):
        return httpx.Response(416, headers={"content-range": f"bytes */{len(data)}"})
    headers = {"content-range": f"bytes {start}-{end}/{len(data)}"}
    return httpx.Response(206, headers=headers, content=data[start : end + 1])


def answer_range(body: bytes, method: str,
                 range_: str | None) -> tuple[int, list[tuple[str, str]], bytes]:
    """``range_response``'s answer as status, headers and body for http.server."""
    headers = {"range": range_} if range_ else {}
    response = range_response(httpx.Request(method, "http://wheel-host/",
                                            headers=headers), body)
    return response.status_code, [*response.headers.items()], response.content
