"""Downloading one file into a partial file beside the artifact store, resumably:
what :meth:`stacklock.store.ArtifactStore.fetch` does over the network. A cut
connection keeps what arrived and the next attempt (of the one retry policy)
asks for the rest with a Range request; a download has a deadline (the request
deadline plus its size at 256 KiB/s) and a size cap."""

from __future__ import annotations

import hashlib
import re
import time
from typing import TYPE_CHECKING

import httpx

from stacklock._fs import file_digest
from stacklock.errors import DownloadError
from stacklock.http import (
    DeadlineExceeded,
    Limits,
    RetriesExhausted,
    Retry,
    describe_http_error,
    header_int,
    is_network_failure,
)
from stacklock.urls import file_url_path, redact_text, redact_url

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["DOWNLOAD_RETRY", "MAX_DOWNLOAD", "download"]

DOWNLOAD_RETRY = Retry(attempts=4)  # a cut download resumes, so try once more
# a download's deadline: the request deadline plus its size at this rate
_SLOWEST = 256 * 1024  # bytes per second
MAX_DOWNLOAD = 32 << 30  # a download of no known size stops here (the largest
# wheels, CUDA runfiles and torch builds, are 2-5 GiB)
_CHUNK = 1 << 20


def _range_start(value: str | None) -> int | None:
    # 19 digits: every real offset; int() refuses a crafted header's 4,300
    match = re.fullmatch(r"bytes (\d{1,19})-\d{1,19}/(?:\d{1,19}|\*)",
                         (value or "").strip())
    return int(match.group(1)) if match else None


def _range_total(value: str | None) -> int | None:
    match = re.fullmatch(r"bytes (?:\*|\d{1,19}-\d{1,19})/(\d{1,19})",
                         (value or "").strip())
    return int(match.group(1)) if match else None


def download(
    http: httpx.Client,
    url: str,
    part: Path,
    *,
    size: int | None,
    progress: Callable[[int, int | None], None] | None,
    retry: Retry | None = None,
) -> str:
    """Fill ``part`` with the whole body (resuming) and return its sha256; a
    ``file://`` URL (a folder index) is copied."""
    shown = redact_url(url)
    local = file_url_path(url)
    if local is not None:
        return _copy(local, part, shown=shown, size=size, progress=progress)
    try:
        return (retry or DOWNLOAD_RETRY).call(lambda _n: _attempt(
            http, url, part, size=size, progress=progress))
    except httpx.TooManyRedirects as exc:
        raise DownloadError("redirect loop: the server sends the file "
                            "round in a circle", url=shown,
                            hint="check the URL and the index") from exc
    except RetriesExhausted as exc:
        raise DownloadError(
            f"download failed after {exc.attempts} attempts "
            f"({redact_text(exc.problem)})", url=shown,
            hint="run the command again: the partial file is kept and resumed",
            network=True,
        ) from exc
    except httpx.HTTPStatusError as exc:
        raise DownloadError(f"HTTP {exc.response.status_code}", url=shown,
                            hint="check the URL and its access",
                            status=exc.response.status_code) from exc
    except httpx.HTTPError as exc:
        raise DownloadError(describe_http_error(exc), url=shown,
                            hint="run the command again: the partial file is "
                                 "kept and resumed",
                            network=is_network_failure(exc)) from exc


def _copy(local: Path, part: Path, *, shown: str, size: int | None,
          progress: Callable[[int, int | None], None] | None) -> str:
    """The file a ``file://`` URL names, copied into ``part`` while hashed. A
    file that is not there is gone (as a 404: an archive may have it)."""
    digest = hashlib.sha256()
    done = 0
    try:
        with local.open("rb") as src, part.open("wb") as dst:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                dst.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, size)
    except FileNotFoundError as exc:
        raise DownloadError("no such file", url=shown, status=404,
                            hint="check the folder index, or give --archive "
                                 "where the file was archived") from exc
    except OSError as exc:
        raise DownloadError(f"cannot read the file ({exc.strerror or exc})",
                            url=shown, hint="check the file and its permissions"
                            ) from exc
    return digest.hexdigest()


def _attempt(
    http: httpx.Client,
    url: str,
    part: Path,
    *,
    size: int | None,
    progress: Callable[[int, int | None], None] | None,
) -> str:
    """One request; returns the sha256 of the whole body. A cut connection
    raises (a transient error: the next attempt resumes from ``part``)."""
    have = part.stat().st_size if part.is_file() else 0
    if size is not None and have > size:
        part.unlink()
        have = 0
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    deadline = Limits.from_env().deadline + (size or 0) / _SLOWEST
    ends = time.monotonic() + deadline
    with http.stream("GET", url, headers=headers) as response:
        content_range = response.headers.get("content-range")
        whole = have in (size, _range_total(content_range))
        if response.status_code == 416 and whole:
            return file_digest(part)  # the partial file was already complete
        response.raise_for_status()
        resumed = response.status_code == 206
        if resumed and _range_start(content_range) != have:
            part.unlink()  # a range we did not ask for: start over
            raise httpx.RemoteProtocolError(
                f"asked for bytes {have}-, got {content_range}",
                request=response.request)
        total = size
        length = header_int(response.headers.get("content-length", ""))
        if total is None and length is not None:
            total = length + (have if resumed else 0)
        digest = hashlib.sha256()
        with part.open("r+b" if resumed else "wb") as fh:
            if resumed:
                for chunk in iter(lambda: fh.read(_CHUNK), b""):
                    digest.update(chunk)
            done = fh.tell()
            cap = total if total is not None else MAX_DOWNLOAD
            for chunk in response.iter_bytes():
                fh.write(chunk)  # a cut keeps what arrived
                digest.update(chunk)
                done += len(chunk)
                if done > cap:
                    break
                if progress is not None:
                    progress(done, total)
                if time.monotonic() > ends:
                    raise DeadlineExceeded(
                        f"still downloading after {deadline:.0f} s; the "
                        "partial file is kept", request=response.request)
    if done > (total if total is not None else MAX_DOWNLOAD):
        part.unlink()
        raise DownloadError(
            f"got more than the {total or MAX_DOWNLOAD} bytes expected",
            url=redact_url(url),
            hint="the file changed upstream; re-resolve with --refresh",
        )
    if total is not None and done < total:
        raise httpx.RemoteProtocolError(
            f"connection closed after {done} of {total} bytes",
            request=response.request)
    return digest.hexdigest()
