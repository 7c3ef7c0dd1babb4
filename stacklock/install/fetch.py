"""Install's fetch step: every artifact into the store before anything is built.

Wheels (unless uv is left to download them) and the CUDA runfile go through the
content-addressed artifact store: resumable, sha256-checked, and traceable later by
validate. The plan then names the stored wheels, so uv installs from local files.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from stacklock.http import make_http_client
from stacklock.install.toolkit import fetch_runfile
from stacklock.lock import wheel_sha256

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import httpx

    from stacklock.install.plan import InstallPlan
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
) -> InstallPlan:
    """Fetch the plan's wheels into the store; uv then reads them by ``path``."""
    urls = {wheel_sha256(w): w.url for p in lock.packages for w in p.files if w.url}
    local = dict(plan.local_wheels)
    for item in plan.downloads:
        url = urls.get(item.sha256)
        if item.kind == "runfile" or item.cached or url is None:
            continue
        path, _ = store.fetch(
            http,
            url,
            expected_sha256=item.sha256,
            size=item.size,
            progress=_named(on_download, item.filename),
        )
        local[item.sha256] = str(path)
    return replace(plan, local_wheels=local)


def fetch_artifacts(
    lock: Lock,
    plan: InstallPlan,
    *,
    store: ArtifactStore,
    http: httpx.Client | None,
    on_download: Callable[[str, int, int | None], None] | None,
    prefetch: bool,
) -> tuple[InstallPlan, Path | None]:
    """The plan with its stored wheels, and the verified runfile (if one runs)."""
    own_http = http or make_http_client(timeout=60.0)
    try:
        if prefetch:
            plan = _prefetch_wheels(
                lock, plan, store=store, http=own_http, on_download=on_download
            )
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
