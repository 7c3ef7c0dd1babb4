"""stacklock.http against real servers on loopback: a gzip bomb, a server that drips,
a rate limit with Retry-After, and a private index that answers 401 unless the
request carries its credentials (pages, range reads, downloads), with a redirect to
another origin that must not get them."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import subprocess
import sys
import textwrap
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

import pytest

from stacklock.errors import IndexUnreadable
from stacklock.http import (
    BodyTooLarge,
    Credentials,
    DeadlineExceeded,
    Limits,
    Retry,
    get,
    make_http_client,
)
from stacklock.index.client import IndexClient
from stacklock.metadata.ranges import RangeReader
from stacklock.profile import IndexSpec
from stacklock.store import ArtifactStore
from tests.helpers.loopback import loopback

if TYPE_CHECKING:
    from pathlib import Path

WHEEL = b"PK" + bytes(range(256)) * 64  # 16 KiB standing in for a wheel's bytes
TOKEN = "Basic " + base64.b64encode(b"alice:s3cret").decode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str | None]]
    routes: dict[str, Any]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("authorization")))
        self.routes.get(self.path, _not_found)(self)

    def reply(self, status: int, body: bytes = b"", **headers: str) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _not_found(h: _Handler) -> None:
    h.reply(404)


def _serve(routes: dict[str, Any]) -> tuple[Any, list[tuple[str, str | None]]]:
    seen: list[tuple[str, str | None]] = []
    handler = type("Handler", (_Handler,), {"seen": seen, "routes": routes})
    return loopback(handler), seen


def test_a_gzip_bomb_is_cut_at_the_cap_with_bounded_memory(tmp_path: Path) -> None:
    """1 MiB of gzip that decodes to 1 GiB: refused at a 64 MiB cap, and the
    process stays far below the bomb's size (measured in a child process)."""
    script = textwrap.dedent("""
        import gzip, io, resource, sys
        from http.server import BaseHTTPRequestHandler
        import httpx
        from stacklock.http import BodyTooLarge, Limits, get, make_http_client
        from tests.helpers.loopback import loopback

        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
            block = bytes(1 << 20)
            for _ in range(1024):
                gz.write(block)
        bomb = buf.getvalue()

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(bomb)))
                self.end_headers()
                self.wfile.write(bomb)

        with loopback(H) as base, make_http_client() as http:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            try:
                get(http, base + "/simple/x/")
            except BodyTooLarge as exc:
                print("refused", exc)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print("bomb", len(bomb), "grew_kib", after - before)
    """)
    from tests.helpers.data import ROOT

    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=True)
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert "67108864 bytes decoded" in lines["refused"]
    bomb_size, grew = lines["bomb"].split(" grew_kib ")
    assert int(bomb_size) < 2 << 20  # the bomb is small on the wire
    assert int(grew) < 256 * 1024  # < 256 MiB more, for a 1 GiB bomb


def test_a_drip_is_cut_at_the_deadline() -> None:
    def drip(h: _Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        for _ in range(1000):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.05)

    served, _seen = _serve({"/slow": drip})
    with served as base, make_http_client() as http:
        with pytest.raises(DeadlineExceeded, match=r"still reading after 0\.5 s"):
            get(http, f"{base}/slow", limits=Limits(deadline=0.5))


def test_a_429_with_retry_after_is_waited_for_then_read() -> None:
    answers = iter([(429, {"Retry_After": "1"}), (200, {})])

    def limited(h: _Handler) -> None:
        status, headers = next(answers)
        h.reply(status, b"ok" if status == 200 else b"", **headers)

    served, seen = _serve({"/simple/x/": limited})
    slept: list[float] = []
    with served as base, make_http_client() as http:
        policy = Retry(sleep=slept.append, random=lambda: 0.5)
        answer = policy.call(lambda _n: get(http, f"{base}/simple/x/"))
    assert answer.status_code == 200 and answer.content == b"ok"
    assert slept == [1.0] and len(seen) == 2


def _private_routes(files: str) -> dict[str, Any]:
    """A private index: 401 unless the request carries alice's credentials."""
    page = json.dumps({"meta": {"api-version": "1.0"}, "name": "x", "files": [
        {"filename": "x-1.0-py3-none-any.whl", "url": "/files/x-1.0-py3-none-any.whl",
         "hashes": {"sha256": hashlib.sha256(WHEEL).hexdigest()}}]}).encode()

    def guarded(serve: Any) -> Any:
        def route(h: _Handler) -> None:
            if h.headers.get("authorization") != TOKEN:
                h.reply(401, b"who are you", WWW_Authenticate='Basic realm="x"')
            else:
                serve(h)
        return route

    def wheel(h: _Handler) -> None:
        spec = h.headers.get("range", "")
        if spec.startswith("bytes=-"):
            n = int(spec[7:])
            size = len(WHEEL)
            h.reply(206, WHEEL[-n:],
                    Content_Range=f"bytes {size - n}-{size - 1}/{size}")
        else:
            h.reply(200, WHEEL)

    def moved(h: _Handler) -> None:
        h.reply(302, Location=f"{files}/elsewhere.whl")

    return {
        "/simple/x/": guarded(lambda h: h.reply(
            200, page, Content_Type="application/vnd.pypi.simple.v1+json")),
        "/files/x-1.0-py3-none-any.whl": guarded(wheel),
        "/files/moved.whl": guarded(moved),
    }


def test_a_private_index_gets_its_credentials_for_page_range_and_download(
        tmp_path: Path) -> None:
    other_routes = {"/elsewhere.whl": lambda h: h.reply(200, WHEEL)}
    other, other_seen = _serve(other_routes)
    with other as files:
        served, seen = _serve(_private_routes(files))
        with served as base:
            url = base.replace("http://", "http://alice:s3cret@") + "/simple"
            index = IndexSpec(name="corp", url=url)
            with make_http_client(credentials=Credentials([(index.name, index.url)])
                                  ) as http:
                client = IndexClient(http, cache_dir=tmp_path / "cache")
                (link,) = client.get_links(index, "x")
                reader = RangeReader(http, link.url, on_bytes=lambda n: None)
                assert reader.open_tail(1024)
                store = ArtifactStore(tmp_path / "artifacts")
                _path, sha = store.fetch(http, link.url)
                assert sha == hashlib.sha256(WHEEL).hexdigest()
                store.fetch(http, f"{base}/files/moved.whl")
    assert [a for _p, a in seen] == [TOKEN] * len(seen)
    assert other_seen == [("/elsewhere.whl", None)]  # the redirect went without
    cached = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*")
                      if p.is_file())
    assert b"s3cret" not in cached


def test_a_private_index_without_credentials_is_one_line_naming_the_remedy(
        tmp_path: Path) -> None:
    served, _seen = _serve(_private_routes("http://127.0.0.1:9"))
    with served as base, make_http_client(credentials=Credentials(
            netrc_file=tmp_path / "none")) as http:
        index = IndexSpec(name="corp", url=f"{base}/simple")
        with pytest.raises(IndexUnreadable, match=r"HTTP 401.*STACKLOCK_INDEX_"):
            IndexClient(http, cache_dir=None).get_links(index, "x")


def test_the_cap_applies_to_plain_bodies_too() -> None:
    served, _seen = _serve({"/big": lambda h: h.reply(200, bytes(4096))})
    with served as base, make_http_client() as http:
        with pytest.raises(BodyTooLarge):
            get(http, f"{base}/big", limits=Limits(max_bytes=1000))
        assert get(http, f"{base}/big", limits=Limits(max_bytes=4096)).content == \
            bytes(4096)


def test_gzip_pages_decode(tmp_path: Path) -> None:
    body = b"<a href='x-1.whl'>x</a>" * 100
    served, _seen = _serve({"/p": lambda h: h.reply(
        200, gzip.compress(body), Content_Encoding="gzip")})
    with served as base, make_http_client() as http:
        assert get(http, f"{base}/p").content == body

