"""Install's fetch step: what only stacklock fetches, before anything is built.

uv downloads the wheels itself: the lock pins each by URL and sha256, uv installs
with ``--require-hashes`` and verifies every byte, downloading in parallel while it
unpacks, and keeps one copy (unpacked, in its cache). Going through stacklock's
store first cost a second copy of the stack and a serial download (measured on
``pypi-cu130``, 207 wheels, 4.3 GB: 257.6 s against uv's 56.1 s).

The content-addressed artifact store keeps what stacklock must fetch or hash
itself: the CUDA runfile, the sdists uv builds (validate checks the built sdist
against the lock), and wheels already there (a pack, a resolve that hashed a
download); the plan names those, so uv installs them from local files.
``prefetch`` puts every wheel in the store first (a node that should keep them);
an install with an archive (``--archive``) does, so that a file whose URL is gone
comes from the archive (:mod:`stacklock.lockarchive`), checked against its sha256
like any other.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from stacklock.install.toolkit import fetch_runfile

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import httpx

    from stacklock.install.plan import Download, InstallPlan
    from stacklock.lock import Lock
    from stacklock.store import ArtifactStore

__all__ = ["fetch_artifacts"]


def _named(
    on_download: Callable[[str, int, int | None], None] | None, name: str
) -> Callable[[int, int | None], None] | None:
    if on_download is None:
        return None
    return lambda done, total: on_download(name, done, total)


def _prefetch_wheels(
    lock: Lock,
    plan: InstallPlan,
    *,
    store: ArtifactStore,
    http: httpx.Client,
    on_download: Callable[[str, int, int | None], None] | None,
    prefetch: bool,
) -> InstallPlan:
    """Fetch the plan's sdists (every wheel too, with ``prefetch``) into the
    store; uv then reads them by ``path``."""
    from stacklock.lock import wheel_sha256

    urls = {wheel_sha256(w): w.url for p in lock.packages for w in p.all_files
            if w.url}
    local = dict(plan.local_wheels)
    for item in _store_items(plan, prefetch=prefetch):
        url = urls.get(item.sha256)
        if url is None:
            continue
        path, _ = store.fetch(
            http,
            url,
            expected_sha256=item.sha256,
            size=item.size,
            progress=_named(on_download, item.filename),
            filename=item.filename,
        )
        local[item.sha256] = str(path)
    return replace(plan, local_wheels=local)


def _store_items(plan: InstallPlan, *, prefetch: bool) -> list[Download]:
    """The downloads stacklock makes itself: sdists, every wheel with
    ``prefetch``; never what is in the store already."""
    return [
        d for d in plan.downloads
        if not d.cached and (d.kind == "sdist" or (prefetch and d.kind == "wheel"))
    ]


def _check_local_wheels(plan: InstallPlan, *, prefetch: bool) -> None:
    """A wheel the lock finds in a folder on this machine (a ``file://`` URL of
    a folder index) that is gone is named here, before uv is asked for it and
    fails in its cache's words. With an archive (``prefetch``) the store reads
    such a file from the archive instead."""
    from stacklock.errors import InstallError
    from stacklock.index.local import is_local, local_path

    for item in plan.downloads:
        if (prefetch or item.cached or item.kind != "wheel" or not is_local(item.url)
                or item.sha256 in plan.local_wheels):
            continue
        if not local_path(item.url).is_file():
            raise InstallError(
                f"{plan.lock_path}: {item.filename}: {local_path(item.url)}: "
                "no such file (the lock's folder index lost it)",
                hint="restore the folder, or install with --archive DIR (or "
                     "STACKLOCK_ARCHIVE) naming a copy `stacklock archive` made")


def fetch_artifacts(
    lock: Lock,
    plan: InstallPlan,
    *,
    store: ArtifactStore,
    http: httpx.Client | None,
    on_download: Callable[[str, int, int | None], None] | None,
    prefetch: bool,
) -> tuple[InstallPlan, Path | None]:
    """The plan with its stored files, and the verified runfile (if one runs).
    Nothing to fetch here (a lock of wheels only) costs no HTTP client."""
    _check_local_wheels(plan, prefetch=prefetch)
    runs = plan.runfile_command is not None and plan.toolkit is not None
    if not runs and not _store_items(plan, prefetch=prefetch):
        return plan, None
    from stacklock.http import Credentials, make_http_client

    indexes = lock.stack.indexes if lock.stack is not None else ()
    own_http = http or make_http_client(timeout=60.0, credentials=Credentials(
        (index.name, index.url) for index in indexes))
    try:
        plan = _prefetch_wheels(lock, plan, store=store, http=own_http,
                                on_download=on_download, prefetch=prefetch)
        runfile = None
        if plan.runfile_command and plan.toolkit is not None:
            runfile = fetch_runfile(
                plan.toolkit,
                store=store,
                http=own_http,
                progress=_named(on_download, str(plan.toolkit.runfile)),
            )
    finally:
        if http is None:
            own_http.close()
    return plan, runfile
