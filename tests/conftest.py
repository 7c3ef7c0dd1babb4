"""Shared fixtures: the recorded data folder, a loopback index server, the install
tests' loopback file server, and an index client factory that never sleeps. What
they are built from lives in ``tests/helpers/``."""

from __future__ import annotations

from functools import partial
from http.server import SimpleHTTPRequestHandler
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.helpers.data import DATA
from tests.helpers.install_server import Served, serve
from tests.helpers.isolation import _offline, _process_state  # noqa: F401 (autouse)
from tests.helpers.loopback import loopback
from tests.helpers.patched import Index, serve_index

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def server() -> Iterator[tuple[str, Served]]:
    """(base URL, Served) of the install tests' loopback file server, one per
    test (see tests/helpers/install_server.py)."""
    with serve() as running:
        yield running


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def local_index():
    """A loopback HTTP server serving tests/data/ (read-only); yields its base URL,
    e.g. ``f"{local_index}/real/sgl-project-whl-gh-pages/cu130"``."""
    with loopback(partial(_QuietHandler, directory=str(DATA))) as base:
        yield base


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
        http = httpx.Client(transport=transport, auth=kwargs.pop("auth", None))
        made.append(http)
        slept: list[float] = []
        kwargs.setdefault("cache_dir", tmp_path / "cache")
        kwargs["retry"] = replace(kwargs.get("retry", PAGE_RETRY), sleep=slept.append,
                                  random=lambda: 0.5)  # no jitter
        client = IndexClient(http, **kwargs)
        client.slept = slept  # type: ignore[attr-defined]
        return client

    yield make
    for http in made:
        http.close()


@pytest.fixture
def sgl_derived(tmp_path: Path) -> Path:
    """The real sgl-kernel cu130 page plus one anchor with the sha256 of the
    stand-in wheel (tests/helpers/standins.py) the loopback mirror's github.com
    serves, so that wheel settles by download."""
    import hashlib
    from pathlib import Path

    from tests.helpers.mirror import derived_index
    from tests.helpers.standins import stand_in_wheel

    sha = hashlib.sha256(stand_in_wheel()).hexdigest()
    return Path(derived_index(tmp_path, sha))


@pytest.fixture
def patched_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stacklock's and uv's caches in ``tmp_path``, which is the working
    directory (the patch tests: ``pytest.mark.usefixtures("patched_env")``)."""
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def patched_index() -> Iterator[Index]:
    """A loopback simple index of the recorded iniconfig, six and idna wheels
    (tests/helpers/patched.py), for one test."""
    with serve_index() as running:
        yield running
