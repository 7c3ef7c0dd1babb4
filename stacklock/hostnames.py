"""Each host name looked up once per run, for the connections httpcore opens.

httpcore asks the system resolver for every new connection, and a resolution
opens many: up to ten pooled connections shared by the index host and the
file host, plus the early page fetches. On the machines these numbers come from,
a lookup now and then goes unanswered and the system resolver waits its 5 s
timeout before asking again: a 0.4 s resolution took 5.3 s when two range reads
hit one. :class:`CachingBackend` looks each name up once (the threads that want
it meanwhile wait for that one answer) and connects to the addresses it gave, in
order; TLS still checks the certificate against the host name, which httpcore
passes on its own. A failed lookup is not remembered.
"""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING, Any

import httpcore

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["CachingBackend", "lookup"]

_found: dict[tuple[str, int], list[str]] = {}
_locks: dict[tuple[str, int], threading.Lock] = {}
_guard = threading.Lock()


def lookup(host: str, port: int) -> list[str]:
    """The addresses of ``host`` (the system resolver's order), looked up once
    per run; raises httpcore.ConnectError when there are none."""
    key = (host, port)
    found = _found.get(key)
    if found is not None:
        return found
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        found = _found.get(key)
        if found is None:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise httpcore.ConnectError(str(exc)) from exc
            found = list(dict.fromkeys(str(info[4][0]) for info in infos))
            _found[key] = found
    return found


class CachingBackend(httpcore.SyncBackend):
    """httpcore's own backend, connecting to addresses from :func:`lookup`."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None,
                    ) -> httpcore.NetworkStream:
        last: Exception | None = None
        for address in lookup(host, port):
            try:
                return super().connect_tcp(address, port, timeout=timeout,
                                           local_address=local_address,
                                           socket_options=socket_options)
            except httpcore.ConnectError as exc:  # the next address
                last = exc
        raise last or httpcore.ConnectError(f"no address for {host}")
