"""Host name lookups for the one HTTP client: once per host per client, and
asked again beside a late answer.

httpcore connects with ``socket.create_connection``, which asks the system
resolver every time: a resolve opens 12-14 connections to two hosts, so 12-14
lookups. Behind a resolver that loses a UDP answer now and then (glibc sends the
A and AAAA queries together and a NAT or conntrack table drops one of them: the
5-second stall known from containers), a lost answer costs the resolver's whole
timeout, 5 s. Measured on the machines the benchmarks run on: 6 of 160 lookups
took 5.006 s, the rest under 3 ms, so about one resolve in three waited 5 s
for a name it had already looked up.

:class:`Lookups` keeps each host's addresses for the client's life (a run: a
name's TTL does not matter at that scale) and, when an answer has not come
after ``hedge_after`` seconds, asks again beside the first question and takes
whichever answer comes first. :class:`LookupOnceBackend` is the httpcore
network backend that connects to those addresses; TLS still names the host
(httpcore passes the origin's name as the server name, not the address). Its
connections read TLS as :class:`~stacklock.netstream.DrainingStream` does.
"""

from __future__ import annotations

import queue
import socket
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

import httpcore

from stacklock.netstream import DrainingStream

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["HEDGE_AFTER", "LookupOnceBackend", "Lookups"]

HEDGE_AFTER = 0.25  # seconds before the same question is asked a second time
ATTEMPTS = 3  # questions asked at most for one name, one every HEDGE_AFTER

Address = tuple[int, str]  # (family, address) as connect wants it


def _system_lookup(host: str, port: int) -> list[Address]:
    found: list[Address] = []
    for family, _, _, _, sockaddr in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM):
        address, scope = str(sockaddr[0]), sockaddr[3:4]
        if family == socket.AF_INET6 and scope and scope[0]:  # link-local
            address = f"{address}%{scope[0]}"
        found.append((family, address))
    return found


class Lookups:
    """Each host's addresses, looked up once; callers that ask for a name being
    looked up wait for that one answer."""

    def __init__(self, lookup: Callable[[str, int], list[Address]] = _system_lookup,
                 *, hedge_after: float = HEDGE_AFTER) -> None:
        self._lookup = lookup
        self._hedge_after = hedge_after
        self._known: dict[tuple[str, int], Future[list[Address]]] = {}
        self._lock = threading.Lock()

    def addresses(self, host: str, port: int) -> list[Address]:
        """``host``'s addresses, in the resolver's order; raises the lookup's
        error (``OSError``; ``UnicodeError`` for a name IDNA refuses). A failed
        lookup is not kept: the next connection asks again."""
        key = (host, port)
        with self._lock:
            known = self._known.get(key)
            asking = known is None
            if known is None:
                known = self._known[key] = Future()
        if asking:
            try:
                found = self._ask(host, port)
            except BaseException as exc:  # an error, or Ctrl-C while waiting
                with self._lock:
                    del self._known[key]
                known.set_exception(exc)  # those waiting for it learn it too
                raise
            known.set_result(found)
        return known.result()

    def _ask(self, host: str, port: int) -> list[Address]:
        """The first answer of up to :data:`ATTEMPTS` questions, one more each
        ``hedge_after`` seconds while none has answered; the error once every
        question asked has failed (the resolver said so: not asked again). The
        questions run on daemon threads: a stuck one never holds the process."""
        answers: queue.Queue[list[Address] | Exception] = queue.Queue()

        def ask() -> None:
            try:
                answers.put(self._lookup(host, port))
            except Exception as exc:  # handed over: raised by the asker
                answers.put(exc)

        def start() -> None:
            threading.Thread(target=ask, name=f"lookup {host}", daemon=True).start()

        start()
        asked, failed = 1, 0
        while True:
            try:
                answer = answers.get(
                    timeout=self._hedge_after if asked < ATTEMPTS else None)
            except queue.Empty:  # late: ask again beside it
                start()
                asked += 1
                continue
            if not isinstance(answer, Exception):
                return answer
            failed += 1
            if failed == asked:
                raise answer


class LookupOnceBackend(httpcore.SyncBackend):
    """httpcore's blocking backend, connecting to the addresses :class:`Lookups`
    keeps rather than asking the resolver for every connection."""

    def __init__(self, lookups: Lookups | None = None) -> None:
        self.lookups = lookups or Lookups()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
                    ) -> httpcore.NetworkStream:
        try:
            found = self.lookups.addresses(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        error: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for _, address in found:  # in order, as socket.create_connection tries
            try:
                return DrainingStream(super().connect_tcp(
                    address, port, timeout, local_address, socket_options))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error or httpcore.ConnectError(f"{host}: the lookup found no address")
