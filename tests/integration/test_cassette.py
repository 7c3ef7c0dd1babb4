"""The cassette layer itself: what RecordingTransport writes, ReplayTransport
serves back unchanged (ranges, HEAD, redirects, gzip-encoded bodies)."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest

from tests.helpers.cassette import CassetteMiss, RecordingTransport, ReplayTransport
from tests.helpers.data import PYPI_PAGES, read_fixture

BODY = read_fixture(PYPI_PAGES / "torch.json")  # a real page, > 32 KiB


def upstream(request: httpx.Request) -> httpx.Response:
    """A stand-in server: a redirect, a gzip-encoded page, ranges and HEAD."""
    if request.url.path == "/old/":
        return httpx.Response(301, headers={"location": "https://h.example/new/"})
    if request.url.path == "/new/":
        return httpx.Response(200, headers={"content-encoding": "gzip",
                                            "content-type": "application/json"},
                              content=gzip.compress(BODY))
    rng = request.headers.get("range")
    if request.method == "HEAD":
        return httpx.Response(200, headers={"content-length": str(len(BODY))})
    if rng:
        start = int(rng.removeprefix("bytes=").split("-")[0])
        part = BODY[start:start + 100]
        return httpx.Response(206, content=part, headers={
            "content-range": f"bytes {start}-{start + 99}/{len(BODY)}"})
    return httpx.Response(404)


def test_record_then_replay_is_identical(tmp_path):
    recorder = RecordingTransport(tmp_path, httpx.MockTransport(upstream))
    with httpx.Client(transport=recorder, follow_redirects=True) as http:
        page = http.get("https://u:pw@h.example/old/")
        head = http.head("https://h.example/f.whl")
        part = http.get("https://h.example/f.whl", headers={"Range": "bytes=5-104"})
        missing = http.get("https://h.example/nope")
    saved = json.loads((tmp_path / "cassette.json").read_text())
    assert len(saved["entries"]) == 5
    assert "pw" not in (tmp_path / "cassette.json").read_text()
    assert list((tmp_path / "bodies").glob("*.gz"))  # the big body is compressed

    replay = ReplayTransport(tmp_path)
    with httpx.Client(transport=replay, follow_redirects=True) as http:
        assert http.get("https://h.example/old/").content == page.content == BODY
        again = http.head("https://h.example/f.whl")
        assert again.headers["content-length"] == head.headers["content-length"]
        assert again.content == b""
        ranged = http.get("https://h.example/f.whl", headers={"Range": "bytes=5-104"})
        assert ranged.status_code == 206 and ranged.content == part.content
        assert ranged.content == BODY[5:105]
        assert http.get("https://h.example/nope").status_code == missing.status_code
        with pytest.raises(CassetteMiss):
            http.get("https://h.example/f.whl", headers={"Range": "bytes=0-9"})
    assert replay.unused() == []
    assert replay.bytes_served == len(BODY) + 100
