"""Locking a profile (``stacklock resolve``): resolve it, then write the lock."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stacklock.lock import default_lock_path, dump_lock, make_lock
from stacklock.profile import load_profile
from stacklock.resolve.resolution import Resolution, resolve_profile
from stacklock.resolve.source import few_collections

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import httpx

__all__ = ["ResolveResult", "lock_profile", "render_resolve"]


@dataclass(frozen=True, kw_only=True)
class ResolveResult:
    lock: Path
    resolution: Resolution
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"lock": str(self.lock), "packages": len(self.resolution.packages),
                "seconds": round(self.seconds, 3)}


def lock_profile(
    profile: str,
    *,
    output: str | Path | None = None,
    index_urls: Mapping[str, str] | None = None,
    offline: bool = False,
    refresh: bool = False,
    cache_dir: Path | None = None,
    http: httpx.Client | None = None,
    on_status: Callable[[str], None] | None = None,
    on_download: Callable[[str, int, int | None], None] | None = None,
) -> ResolveResult:
    """Resolve ``profile`` (a built-in name or a path) and write its lock; on a
    ResolutionError nothing is written and an old lock stays as it was."""
    started = time.monotonic()
    loaded = load_profile(profile)
    if index_urls:
        loaded = loaded.with_index_urls(dict(index_urls))
    path = Path(output) if output is not None else default_lock_path(loaded.name)
    # the lock's rendering too, after the resolution
    with few_collections():
        resolution = resolve_profile(loaded, http=http, offline=offline,
                                     refresh=refresh, cache_dir=cache_dir,
                                     on_status=on_status,
                                     on_download=on_download)
        dump_lock(make_lock(resolution, path=path), path)
    return ResolveResult(lock=path, resolution=resolution,
                         seconds=time.monotonic() - started)


def render_resolve(result: ResolveResult) -> str:
    res = result.resolution
    lines = [f"locked {len(res.packages)} packages for {res.profile.name} in "
             f"{result.seconds:.1f} s -> {result.lock}"]
    for applied in res.overrides:
        lines.append(f"  override: {applied.package or 'profile'} {applied.original}"
                     f" -> {applied.override}")
    downloaded = [p.name for p in res.packages if p.wheel.hash_source == "download"]
    if downloaded:
        lines.append("  hashed by download (the index gave no single sha256): "
                     + ", ".join(downloaded))
    for finding in res.coherence:
        if getattr(finding, "level", "ok") != "ok":
            lines.append(f"  cuda {finding.level}: {finding.package}: "
                         f"{finding.message}")
    return "\n".join(lines)
