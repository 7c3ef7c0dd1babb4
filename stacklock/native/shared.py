"""Native facts shared by a team or a CI fleet: read once per fleet, not per machine.

A wheel's facts (which sonames and symbols its shared objects need and export)
depend on its sha256 alone and are small: 2.8 MB gzipped for the 207 wheels of
``pypi-cu130``, whose check reads ~485 MB of wheels to make them. The local cache
keeps them under ``<cache>/native/<sha256>.json.gz``; ``STACKLOCK_NATIVE_FACTS``
names a second place with the same layout, asked on a local miss before any
wheel is read:

- a folder (a shared mount, a restored CI cache): ``/srv/stacklock/native``;
- an HTTP(S) prefix (any static file server, an object store's public URL):
  ``https://ci.example.com/stacklock/native``.

Fill it by copying a cache's ``native/`` folder there (``rsync``, ``aws s3
sync``): the entries are the same bytes. An entry is used only if it parses,
has this version's format and names the sha256 asked for; anything else (a
missing entry, a torn or foreign file, a server that fails) is a miss and the
wheel is read as without the source. Facts cannot be checked against a wheel
without reading it: the source is trusted like the cache it was copied from,
so point it only at a place your team writes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from urllib.request import url2pathname

import httpx

from stacklock.errors import StacklockError
from stacklock.http import Limits, describe_http_error, get
from stacklock.urls import redact_text, redact_url

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DEADLINE", "ENV", "SharedFacts"]

ENV = "STACKLOCK_NATIVE_FACTS"
DEADLINE = 10.0  # seconds for one entry from a server (the largest: ~2 MB)


class SharedFacts:
    """The entries of one shared source; counts the ones used and says why
    others could not be. Safe to use from threads."""

    def __init__(self, where: str, http: httpx.Client) -> None:
        self.where = where
        self._http = http
        self._url = where.startswith(("http://", "https://"))
        self._lock = threading.Lock()
        self.hits = 0  # entries used
        self.failures: list[str] = []  # why the source could not answer
        self._down = ""  # why the server is not asked any more, once it is not

    @classmethod
    def from_env(cls, http: httpx.Client, *, offline: bool = False,
                 environ: Mapping[str, str] | None = None) -> SharedFacts | None:
        """The source ``STACKLOCK_NATIVE_FACTS`` names; offline, a folder only."""
        where = (os.environ if environ is None else environ).get(ENV, "").strip()
        if where.startswith("file:"):
            where = url2pathname(urlsplit(where).path)
        if not where or (offline and where.startswith(("http://", "https://"))):
            return None
        if "://" in where and not where.startswith(("http://", "https://")):
            raise StacklockError(f"{ENV}={redact_url(where)}: not a folder or an "
                                 "http(s) URL",
                                 hint="e.g. /srv/stacklock/native or "
                                      "https://ci.example.com/stacklock/native")
        if "://" not in where and not Path(where).is_dir():
            raise StacklockError(f"{ENV}={where}: no such folder",
                                 hint="point it at a copy of a cache's native/ "
                                      "folder, or unset it")
        return cls(where, http)

    def entry(self, sha256: str) -> bytes | None:
        """The entry for ``sha256``'s wheel, or None: not there, or it could not
        be had (counted in ``failures``, without credentials). A server that
        timed out or could not be reached once is not asked again this run: a
        stalled source costs one :data:`DEADLINE`, not one per wheel."""
        name = f"{sha256.lower()}.json.gz"
        if self._down:
            with self._lock:
                self.failures.append(f"{name}: not asked ({self._down})")
            return None
        try:
            return self._fetch(name)
        except (OSError, httpx.HTTPError) as exc:
            why = describe_http_error(exc) if isinstance(exc, httpx.HTTPError) \
                else redact_text(str(exc))  # no credentials in a warning
            with self._lock:
                self.failures.append(f"{name}: {why}")
                if isinstance(exc, httpx.TimeoutException | httpx.NetworkError):
                    self._down = f"the source failed before: {why}"
            return None

    def used(self, sha256: str, ok: bool) -> None:
        """Count an entry the caller used (``ok``) or could not: one that is
        there and is no facts entry of this format for this wheel (a torn copy,
        a login page answering every URL) is a failure too."""
        with self._lock:
            if ok:
                self.hits += 1
                return
            self.failures.append(f"{sha256.lower()}.json.gz: not a facts entry "
                                 "of this stacklock for this wheel")

    def _fetch(self, name: str) -> bytes | None:
        if not self._url:
            path = Path(self.where) / name
            if not path.is_file():
                return None
            cap = Limits.from_env().max_bytes
            if path.stat().st_size > cap:
                raise OSError(f"over {cap} bytes")
            return path.read_bytes()
        limits = Limits(max_bytes=Limits.from_env().max_bytes, deadline=DEADLINE)
        response = get(self._http, f"{self.where.rstrip('/')}/{name}",
                       limits=limits, read_body=lambda status: status == 200)
        if response.status_code in (404, 410):
            return None
        response.raise_for_status()
        return response.content
