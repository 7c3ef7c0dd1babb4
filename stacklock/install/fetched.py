"""What an install fetched over the network, measured rather than estimated.

uv fetches the wheels into its own cache, which stacklock does not read: the
plan can say which files are missing from stacklock's store, not which uv will
download. So uv runs with ``RUST_LOG=uv_client=debug``
(:func:`~stacklock.install.uvsteps.uv_environment`), and its HTTP client writes
into the step's log what it did for each URL: ``Sending fresh GET request``
(the body downloaded), ``Found fresh response`` (its cache, no request),
``Sending revalidation request`` then ``Found not-modified response`` (a
request, no body) or ``Found modified response`` (the body downloaded). The
files uv downloaded are the first and the last kind, their bytes the lock's
sizes of them. What stacklock fetched itself (the runfile, sdists,
``--prefetch``) is what its artifact store received this run. A log that names
no URL at all while uv had URLs to install (another uv) says nothing: None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from stacklock.uvoutput import read_log

if TYPE_CHECKING:
    from pathlib import Path

    from stacklock.install.plan import InstallPlan

__all__ = ["Fetched", "uv_fetched"]

# uv_client's debug lines: what it did for each URL
_LINE = re.compile(r"^DEBUG (Sending fresh GET request|Found fresh response|"
                   r"Sending revalidation request|Found not-modified response|"
                   r"Found modified response) for: (\S+)$", re.M)
_BODY = ("Sending fresh GET request", "Found modified response")


@dataclass(frozen=True, kw_only=True)
class Fetched:
    """``uv_files``: files uv downloaded, ``uv_bytes`` their bytes (None: its
    log did not say, or the lock gives no size); ``stacklock_bytes``: what
    stacklock's own downloads received."""

    uv_files: int | None
    uv_bytes: int | None
    stacklock_bytes: int

    @property
    def total(self) -> int | None:
        return None if self.uv_bytes is None else self.uv_bytes + self.stacklock_bytes

    def to_dict(self) -> dict[str, int | None]:
        return {"uv_files": self.uv_files, "uv_bytes": self.uv_bytes,
                "stacklock_bytes": self.stacklock_bytes}


def _filename(url: str) -> str:
    return unquote(urlsplit(url).path.rpartition("/")[2])


def uv_fetched(log: Path, plan: InstallPlan) -> tuple[int | None, int | None]:
    """(files, bytes) uv downloaded in the last run its ``log`` holds."""
    remote = [d for d in plan.downloads
              if d.sha256 not in plan.local_wheels and "://" in d.url]
    try:
        text = read_log(log)
    except OSError:
        return None, None
    run = text.rpartition("\n$ ")[2]  # the last run (its last 16 MiB at most)
    said = _LINE.findall(run)
    if remote and not said:
        return None, None
    bodies = {_filename(url) for what, url in said if what in _BODY}
    fetched = [d for d in remote if d.filename in bodies]
    if any(d.size is None for d in fetched):
        return len(fetched), None
    return len(fetched), sum(d.size or 0 for d in fetched)
