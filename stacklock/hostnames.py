"""Each host name looked up once per run, for the connections
:mod:`stacklock.httppool` opens.

A connection library asks the system resolver for every new connection, and a resolution
opens many: up to ten pooled connections shared by the index host and the
file host, plus the early page fetches. On the machines these numbers come from,
a lookup now and then goes unanswered and the system resolver waits its 5 s
timeout before asking again: a 0.4 s resolution took 5.3 s when two range reads
hit one. :func:`lookup` looks each name up once (the threads that want it
meanwhile wait for that one answer); the pool connects to the addresses it
gave, in order, and TLS still checks the certificate against the host name. A
failed lookup is not remembered.
"""

from __future__ import annotations

import socket
import threading

__all__ = ["lookup"]

_found: dict[tuple[str, int], list[str]] = {}
_locks: dict[tuple[str, int], threading.Lock] = {}
_guard = threading.Lock()


def lookup(host: str, port: int) -> list[str]:
    """The addresses of ``host`` (the system resolver's order), looked up once
    per run; raises OSError (``socket.gaierror``) when there are none."""
    key = (host, port)
    found = _found.get(key)
    if found is not None:
        return found
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        found = _found.get(key)
        if found is None:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            found = list(dict.fromkeys(str(info[4][0]) for info in infos))
            _found[key] = found
    return found

