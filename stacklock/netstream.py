"""A TLS connection that hands httpcore what has arrived, not one record a read.

httpcore reads a connection with ``recv(65536)``; on a TLS socket that returns
one TLS record, at most 16 KB, and each read then passes through httpcore's and
h11's event machinery (a 121 MB range read of libtorch_cpu: ~7,400 passes, each
taking the interpreter lock). :class:`DrainingStream` follows the blocking read
with reads that do not block, taking the records already received, up to
:data:`DRAIN` bytes in all (more than httpcore's 64 KiB: a body received faster
than it is inflated waits in the socket's buffer, and is taken in one pass).
Bytes and their order are the socket's; an error the extra reads meet is left
for the next read to raise, where httpcore maps it.

The native check of ``pypi-cu130``'s lock (488 MB in ranges), 10 alternating
cold runs each: 4.83 s and 6.44 s of CPU, against 5.16 s and 6.81 s reading a
record at a time; drained up to 1 MiB instead of 64 KiB, 1,930 reads instead
of 8,049, 8 alternating runs each: 4.75 s and 6.28 s against 5.09 s and 6.73 s.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpcore

__all__ = ["DRAIN", "DrainingStream"]

DRAIN = 1 << 20  # the most one read hands out, whatever httpcore asked for


class DrainingStream(httpcore.NetworkStream):
    """``inner`` (httpcore's stream over one socket), its TLS reads drained.

    Only a TLS layer this stream started over a plain socket is drained: over a
    TLS socket (TLS to a proxy, then to the origin) the outer socket's bytes
    belong to the inner TLS layer, and its stream is handed back as it is."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner
        sock = inner.get_extra_info("socket")
        self._tls = sock if isinstance(sock, ssl.SSLSocket) else None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._inner.read(max_bytes, timeout)
        max_bytes = max(max_bytes, DRAIN)  # h11 keeps what the response leaves
        tls = self._tls
        if tls is None or not data or len(data) >= max_bytes:
            return data
        pieces = [data]
        got = len(data)
        tls.settimeout(0.0)  # what has arrived, no waiting
        try:
            while got < max_bytes:
                more = tls.recv(max_bytes - got)
                if not more:  # the peer closed: the next read says so
                    break
                pieces.append(more)
                got += len(more)
        except OSError:  # nothing more yet (SSLWantReadError), or an error
            pass         # that the next read meets and httpcore maps
        finally:
            tls.settimeout(timeout)
        return b"".join(pieces) if len(pieces) > 1 else data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext,
                  server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        started = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return started if self._tls is not None else DrainingStream(started)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

