"""What every test gets, autouse from tests/conftest.py.

- The default run is offline, enforced rather than hoped for: for a test not
  marked ``live``, a socket may connect only to loopback or a Unix socket, a name
  is looked up only if it is ``localhost`` or an address already (no DNS query
  leaves the machine), and subprocesses inherit proxy variables that point at a
  closed loopback port (with loopback exempt), so a request that escapes fails at
  once, naming its address.
- Process-wide state a test may change is put back after it: the environment,
  the working directory, and the index client's process-wide page locks.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

_real_connect = socket.socket.connect
_real_getaddrinfo = socket.getaddrinfo
_DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens there


def _allowed(family: int, address: Any) -> bool:
    if family == socket.AF_UNIX:
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded(self: socket.socket, address: Any) -> Any:
    if not _allowed(self.family, address):
        raise OSError(f"offline test: connecting to {address!r} is not allowed "
                      "(mark the test live, or serve it on loopback)")
    return _real_connect(self, address)


def _is_local_name(host: Any) -> bool:
    if host is None or host == "localhost":
        return True
    name = host.decode() if isinstance(host, bytes) else str(host)
    try:
        ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    return True


def _guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _is_local_name(host):
        raise socket.gaierror(socket.EAI_NONAME,
                              f"offline test: looking up {host!r} is not allowed "
                              "(mark the test live, or serve it on loopback)")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def _offline(request: pytest.FixtureRequest,
             monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("live") is not None:
        return
    monkeypatch.setattr(socket.socket, "connect", _guarded)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_lookup)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                 "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, _DEAD_PROXY)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "localhost,127.0.0.1,::1")


@pytest.fixture(autouse=True)
def _process_state() -> Iterator[None]:
    environ, cwd = dict(os.environ), os.getcwd()
    yield
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environ)
    from stacklock.index import client

    client._PAGE_LOCKS.clear()
