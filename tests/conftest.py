"""Shared fixtures: where the recorded data lives, a loopback index server, and a
client factory that never sleeps. Other test modules may append fixtures here."""

from __future__ import annotations

import gzip
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

DATA = Path(__file__).resolve().parent / "data"
REAL = DATA / "real"
SGL_PAGES = REAL / "sgl-project-whl-gh-pages"
FLASHINFER_PAGES = REAL / "flashinfer-ai-whl-gh-pages-2024-03"
PYPI_PAGES = DATA / "pypi"
PYTORCH_PAGES = DATA / "pytorch"


def read_fixture(path: Path) -> bytes:
    """The bytes of a recorded file; ``name`` may be stored as ``name.gz``."""
    if path.is_file():
        return path.read_bytes()
    return gzip.decompress(path.with_name(path.name + ".gz").read_bytes())


@pytest.fixture
def data_dir() -> Path:
    return DATA


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def local_index():
    """A loopback HTTP server serving tests/data/ (read-only); yields its base URL,
    e.g. ``f"{local_index}/real/sgl-project-whl-gh-pages/cu130"``."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_QuietHandler, directory=str(DATA)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def make_client(tmp_path):
    """``make_client(handler_or_transport, **kwargs)`` -> IndexClient over a mock
    transport, with a per-test cache and a sleep that only records delays
    (``client.slept``)."""
    from dataclasses import replace

    from stacklock.index.client import PAGE_RETRY, IndexClient

    made: list[httpx.Client] = []

    def make(transport, **kwargs):
        if callable(transport) and not isinstance(transport, httpx.BaseTransport):
            transport = httpx.MockTransport(transport)
        http = httpx.Client(transport=transport)
        made.append(http)
        slept: list[float] = []
        kwargs.setdefault("cache_dir", tmp_path / "cache")
        kwargs.setdefault("netrc_file", tmp_path / "no-netrc")
        kwargs["retry"] = replace(kwargs.get("retry", PAGE_RETRY), sleep=slept.append)
        client = IndexClient(http, **kwargs)
        client.slept = slept  # type: ignore[attr-defined]
        return client

    yield make
    for http in made:
        http.close()
