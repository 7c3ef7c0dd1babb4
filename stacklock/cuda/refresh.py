"""Check the embedded catalog against NVIDIA's site and learn new releases.

``refresh_catalog`` reads the toolkit archive page (new releases), then per release
the ``md5sum.txt``, the ``local_installers/`` listing and ``redistrib_<v>.json``. A
value the catalog lacks is filled in and reported; a value that disagrees with
NVIDIA (an md5, the manifest's sha256, its nvcc version) is an error, and the catalog
is left as it was: a changed published hash needs a person, never a silent update.
The only HTTP goes through the ``httpx.Client`` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import httpx
from packaging.version import InvalidVersion, Version

from stacklock.cuda.catalog import Catalog, CudaRelease, Runfile
from stacklock.cuda.scrape import (
    ARCHIVE_URL,
    listing_url,
    md5sum_url,
    parse_archive_page,
    parse_local_installers,
    parse_md5sum_txt,
    parse_redistrib_manifest,
    parse_runfile_name,
    redistrib_url,
    runfile_url,
)
from stacklock.errors import CudaError
from stacklock.http import is_network_failure
from stacklock.words import first

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Change", "RefreshReport", "refresh_catalog", "render_refresh"]

FIRST_MAJOR = 12  # the default scope of a refresh: CUDA 12 and newer


@dataclass(frozen=True, kw_only=True)
class Change:
    version: str
    field: str                 # "md5", "runfile", "release", ...
    platform: str | None = None
    old: Any = None
    new: Any = None
    source: str = ""           # the URL the new value came from

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "platform": self.platform,
                "field": self.field, "old": self.old, "new": self.new,
                "source": self.source}

    def describe(self) -> str:
        where = f"{self.version} {self.platform}" if self.platform else self.version
        if self.field == "release":
            return f"{self.version}: new release ({self.source})"
        return f"{where} {self.field}: {self.old} -> {self.new} ({self.source})"


@dataclass(frozen=True, kw_only=True)
class RefreshReport:
    catalog: Catalog
    checked: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()
    urls_read: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"checked": list(self.checked), "urls_read": self.urls_read,
                "changes": [c.to_dict() for c in self.changes],
                "notes": list(self.notes)}


@dataclass
class _State:
    """Mutable bookkeeping of one refresh run (never leaves this module)."""

    http: httpx.Client
    changes: list[Change] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    urls_read: int = 0

    def get(self, url: str) -> bytes | None:
        """The body, None for a 404; unreachable or another status is an error."""
        try:
            response = self.http.get(url)
        except httpx.HTTPError as exc:
            raise CudaError(
                f"cannot reach NVIDIA at {url}: {exc.__class__.__name__}: {exc}",
                hint="the embedded CUDA catalog is used as shipped; retry "
                     "`stacklock cuda refresh` where NVIDIA's site can be reached",
                network=is_network_failure(exc),
            ) from None
        self.urls_read += 1
        if response.status_code == 404:
            self.notes.append(f"{url}: 404, not checked")
            return None
        if response.status_code != 200:
            raise CudaError(f"NVIDIA answered {response.status_code} for {url}",
                            hint="the embedded CUDA catalog is used as shipped")
        return response.content


def _set(state: _State, obj: Any, key: str, new: Any, *, version: str, url: str,
         platform: str | None = None, source: str) -> Any:
    """Fill ``key`` if unknown, report a disagreement if known and different."""
    old = getattr(obj, key)
    if new is None or old == new:
        return obj
    if old is not None:
        where = f"{version} {platform}" if platform else version
        state.conflicts.append(f"{where} {key}: catalog {old}, NVIDIA {new} ({url})")
        return obj
    state.changes.append(Change(version=version, platform=platform, field=key,
                                old=old, new=new, source=url))
    return replace(obj, **{key: new}, sources={**obj.sources, key: source})


def _runfile(state: _State, release: CudaRelease, name: str, url: str
             ) -> CudaRelease:
    parsed = parse_runfile_name(name)
    if parsed is None or parsed[0] != release.version:
        return release
    _version, platform, driver = parsed
    current = release.runfiles.get(platform)
    if current is not None and current.runfile is not None:
        if current.runfile != name:
            state.notes.append(f"{url}: lists {name}, catalog has {current.runfile}")
        return release
    rf = current or Runfile(platform=platform)
    for key, value in (("runfile", name), ("url", runfile_url(release.version, name)),
                       ("bundled_driver", driver)):
        rf = _set(state, rf, key, value, version=release.version, url=url,
                  platform=platform, source=url)
    return replace(release, runfiles={**release.runfiles, platform: rf})


def _check_md5(state: _State, release: CudaRelease) -> CudaRelease:
    url = md5sum_url(release.version)
    body = state.get(url)
    if body is None:
        return release
    sums = parse_md5sum_txt(body, url=url).sums
    for name in sorted(sums):
        release = _runfile(state, release, name, url)
    for platform, rf in sorted(release.runfiles.items()):
        if rf.runfile is None:
            continue
        if rf.runfile not in sums:
            state.notes.append(f"{url}: no md5 for {rf.runfile}")
            continue
        new = _set(state, rf, "md5", sums[rf.runfile], version=release.version,
                   url=url, platform=platform, source="nvidia-md5sum")
        release = replace(release, runfiles={**release.runfiles, platform: new})
    return release


def _check_listing(state: _State, release: CudaRelease) -> CudaRelease:
    url = listing_url(release.version)
    body = state.get(url)
    if body is None:
        return release
    names = parse_local_installers(body)
    for name in names:
        release = _runfile(state, release, name, url)
    for rf in release.runfiles.values():
        if rf.runfile and rf.runfile not in names:
            state.notes.append(f"{url}: does not list {rf.runfile}")
    return release


def _check_redistrib(state: _State, release: CudaRelease) -> CudaRelease:
    url = redistrib_url(release.version)
    body = state.get(url)
    if body is None:
        return release
    manifest = parse_redistrib_manifest(body, url=url)
    if manifest.release_label != release.version:
        state.conflicts.append(f"{url}: release_label {manifest.release_label}")
        return release
    for key, value in (("redistrib_sha256", manifest.sha256),
                       ("release_date", manifest.release_date),
                       ("nvcc_version", manifest.nvcc_version)):
        release = _set(state, release, key, value, version=release.version, url=url,
                       source="redistrib-json")
    driver = manifest.driver_version
    for platform, rf in sorted(release.runfiles.items()):
        if driver and rf.bundled_driver and rf.bundled_driver != driver:
            state.conflicts.append(
                f"{release.version} {platform} bundled_driver: catalog "
                f"{rf.bundled_driver}, NVIDIA {driver} ({url})")
    return release


def refresh_catalog(http: httpx.Client, catalog: Catalog, *,
                    versions: Sequence[str] | None = None,
                    discover: bool = True) -> RefreshReport:
    """Check ``versions`` (default: every release of CUDA 12 and newer, plus the
    new ones the archive page lists) against NVIDIA; return the updated catalog."""
    for version in versions or ():  # bad input is said before any request
        try:
            Version(version)
        except InvalidVersion:
            raise CudaError(f"cuda refresh --version {version!r}: not a version",
                            hint="give a CUDA release such as 13.0.1 (`stacklock "
                                 "cuda list` lists them)") from None
    state = _State(http=http)
    wanted = list(versions) if versions is not None else [
        r.version for r in catalog.releases if r.parsed.major >= FIRST_MAJOR]
    if discover:
        body = state.get(ARCHIVE_URL)
        listed = parse_archive_page(body) if body is not None else []
        for version in listed:
            if Version(version).major < FIRST_MAJOR or catalog.find(version):
                continue
            floor = next((r for r in catalog.releases
                          if r.parsed.major == Version(version).major), None)
            catalog = catalog.with_release(CudaRelease(
                version=version,
                compat_floor=floor.compat_floor if floor else None,
                sources={"compat_floor": "table2"} if floor else {}))
            state.changes.append(Change(version=version, field="release",
                                        source=ARCHIVE_URL))
            if versions is None:
                wanted.append(version)
        if body is not None and not listed:
            state.notes.append(f"{ARCHIVE_URL}: no release links found")
    for version in wanted:
        release = catalog.get(version)
        for step in (_check_md5, _check_listing, _check_redistrib):
            release = step(state, release)
        catalog = catalog.with_release(release)
    if state.conflicts:
        raise CudaError(
            "NVIDIA disagrees with the CUDA catalog: "
            + first(state.conflicts, 3, sep="; "),
            hint="nothing was changed; check which side is right and rebuild the "
                 "catalog with scripts/build_cuda_catalog.py")
    return RefreshReport(catalog=replace(catalog, origin="refreshed"),
                         checked=tuple(wanted), changes=tuple(state.changes),
                         notes=tuple(state.notes), urls_read=state.urls_read)


def render_refresh(report: RefreshReport) -> str:
    lines = [f"checked {len(report.checked)} CUDA releases against NVIDIA "
             f"({report.urls_read} pages read)"]
    if report.changes:
        lines.append(f"{len(report.changes)} changes:")
        lines += [f"  {c.describe()}" for c in report.changes]
    else:
        lines.append("no changes: the embedded catalog agrees with NVIDIA")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)
