"""The default run's offline guard (tests/helpers/isolation.py) holds: nothing but
loopback is connected to, and no name but localhost is looked up."""

from __future__ import annotations

import socket

import httpx
import pytest


def test_a_connection_off_the_machine_is_refused_naming_it() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match=r"192\.0\.2\.1"):
        sock.connect(("192.0.2.1", 443))


def test_a_dns_lookup_is_refused_before_it_leaves() -> None:
    with pytest.raises(socket.gaierror, match=r"offline test: looking up 'pypi\.org'"):
        socket.getaddrinfo("pypi.org", 443)
    with pytest.raises(socket.gaierror, match="offline test"):
        socket.create_connection(("files.pythonhosted.org", 443), timeout=1)


def test_loopback_names_and_addresses_still_resolve() -> None:
    for host in ("localhost", "127.0.0.1", "::1"):
        assert socket.getaddrinfo(host, 80, proto=socket.IPPROTO_TCP)


def test_httpx_to_a_real_index_fails_at_once() -> None:
    with httpx.Client(trust_env=False, timeout=5) as client, \
            pytest.raises(httpx.ConnectError, match="offline test"):
        client.get("https://pypi.org/simple/six/")
