"""From a resolution to its lock: every fact the lock records, nothing from the clock.

Packages are sorted by name and wheels by filename, so the same resolution always
gives the same lock and :func:`~stacklock.lock.write.render_lock` the same bytes.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.markers import Marker
from packaging.pylock import (
    Package,
    PackageArchive,
    PackageDirectory,
    PackageSdist,
    PackageVcs,
    PackageWheel,
)
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from stacklock import __version__
from stacklock.lock.model import Lock, LockedPackage
from stacklock.lock.tables import (
    LOCK_VERSION,
    CudaEntry,
    CudaNote,
    LockedArchive,
    LockedIndex,
    PackageTool,
    StackInfo,
)
from stacklock.lock.toml import LockTable
from stacklock.profile import BUILTIN_DIR
from stacklock.resolve.model import holds_on
from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from stacklock.resolve.result import Resolution, ResolvedPackage

__all__ = ["make_lock"]


def _profile_source(path: str | None, name: str) -> str:
    if path is None:
        return f"profile {name}"
    p = Path(path).resolve()
    if p.parent == BUILTIN_DIR.resolve():
        return f"profiles/{p.name}"
    return str(path)


def _package(p: ResolvedPackage, lock_dir: Path) -> LockedPackage:
    """The package with its wheel, or with its sdist (PEP 751 ``sdist``) and the
    reason install builds it."""
    f = p.wheel
    if p.direct is not None or f is None:
        return _direct_package(p, lock_dir)
    hashes = {"sha256": f.sha256}
    sdist = wheels = None
    if p.is_sdist:
        sdist = PackageSdist(name=f.filename, url=f.url, size=f.size,
                             upload_time=f.upload_time, hashes=hashes)
    else:
        wheels = [PackageWheel(name=f.filename, url=f.url, size=f.size,
                               upload_time=f.upload_time, hashes=hashes)]
    entry = Package(name=p.name, version=p.version, index=p.index_url,
                    dependencies=[{"name": d} for d in p.dependencies],
                    sdist=sdist, wheels=wheels)
    return LockedPackage(entry=entry, tool=PackageTool(
        index_name=p.index_name, cuda=p.cuda, hash_source=f.hash_source,
        build=p.build, yanked=p.yanked, metadata=p.metadata,
        match_runtime=p.match_runtime, patches=p.patches))


def _direct_package(p: ResolvedPackage, lock_dir: Path) -> LockedPackage:
    """A direct reference of the profile as PEP 751 writes one: an ``archive``
    (URL, or path relative to the lock, and sha256), a ``vcs`` at its commit or
    a ``directory``; no version for the last two, which are source trees whose
    version only a build decides (PEP 751)."""
    assert p.direct is not None
    found, ref = p.direct, p.direct.ref
    archive = vcs = directory = None
    version: Version | None = None
    where = os.path.relpath(ref.path, lock_dir) if ref.path is not None else None
    if ref.kind == "archive":
        version = p.version
        archive = PackageArchive(
            url=strip_credentials(ref.url) if ref.url else None, path=where,
            size=found.size, hashes={"sha256": found.sha256 or ""},
            subdirectory=ref.subdirectory)
    elif ref.kind == "vcs":
        assert ref.url is not None and found.commit is not None
        vcs = PackageVcs(type="git", url=strip_credentials(ref.url),
                         requested_revision=ref.revision, commit_id=found.commit,
                         subdirectory=ref.subdirectory)
    else:
        assert where is not None
        directory = PackageDirectory(path=where, editable=False,
                                     subdirectory=ref.subdirectory)
    entry = Package(name=p.name, version=version,
                    dependencies=[{"name": d} for d in p.dependencies],
                    archive=archive, vcs=vcs, directory=directory)
    return LockedPackage(entry=entry, tool=PackageTool(
        hash_source=p.wheel.hash_source if p.wheel is not None else None,
        build=p.build))


def _without_credentials(req: Requirement) -> Requirement:
    """A direct reference's URL as a lock may record it."""
    if not req.url:
        return req
    bare = copy.copy(req)
    bare.url = strip_credentials(req.url)
    return bare


def _stack(resolution: Resolution, where: str) -> StackInfo:
    profile = resolution.profile
    spec = profile.requirements
    env = profile.target.marker_environment()
    allow_mixed = tuple(profile.cuda.allow_mixed)  # reviewed CUDA exceptions
    cuda = None
    if resolution.cuda_entry is not None:
        table = {k: v for k, v in resolution.cuda_entry.items() if v is not None}
        if allow_mixed:
            table["allow-mixed"] = list(allow_mixed)
        cuda = CudaEntry.from_table(LockTable.of(table, path=where,
                                                 key="tool.stacklock.cuda",
                                                 allowed=CudaEntry.KEYS))
    exclude = spec.exclude_newer
    return StackInfo(
        lock_version=LOCK_VERSION, profile=profile.name,
        profile_sha256=profile.sha256, stacklock_version=__version__,
        exclude_newer=exclude.strftime("%Y-%m-%dT%H:%M:%SZ") if exclude else None,
        requirements=tuple(_without_credentials(r) for r in spec.packages),
        overrides=tuple(spec.overrides),
        overrides_ignored=tuple(r for r in spec.overrides if not holds_on(r, env)),
        overrides_applied=tuple(resolution.overrides),
        constraints=tuple(spec.constraints),
        constraints_ignored=tuple(r for r in spec.constraints
                                  if not holds_on(r, env)),
        prereleases=tuple(sorted(spec.prereleases)),
        target=profile.target,
        gpu_variants=tuple(resolution.variants),
        indexes=tuple(LockedIndex(name=i.name, url=strip_credentials(i.url))
                      for i in profile.indexes),
        allow_mixed=allow_mixed if cuda is None else (),
        cuda_notes=tuple(
            CudaNote(package=f.package, level=f.level, cuda=f.cuda, message=f.message)
            for f in sorted(resolution.coherence, key=lambda f: (f.package, f.cuda))
            if f.level in ("warning", "carried")),
        check_allow=tuple(sorted(profile.check.allow)),
        check_passed_over=tuple(
            {"package": p.name, "version": str(p.version), "reason": p.reason}
            for p in resolution.passed_over),
        check_warnings=tuple(dict(w) for w in resolution.native_warnings),
        check_strict=profile.check.strict,
        cuda=cuda, validate=dict(profile.validate) if profile.validate else None,
        archive=LockedArchive(url=profile.archive.url, first=profile.archive.first)
        if profile.archive is not None else None)


def make_lock(resolution: Resolution, *, path: str | Path = "") -> Lock:
    """The lock for a resolution; ``path`` is where it will be written."""
    profile = resolution.profile
    target = profile.target
    source = _profile_source(profile.path, profile.name)
    python = ".".join(map(str, target.python_minor))
    lock_dir = Path(path).resolve().parent if path else Path.cwd()
    packages = tuple(_package(p, lock_dir) for p in sorted(resolution.packages,
                                                            key=lambda p: p.name))
    return Lock(path=str(path), lock_version=Version("1.0"),
                environments=(Marker(target.environment_marker()),),
                requires_python=SpecifierSet(f"=={python}.*"),
                created_by="stacklock", packages=packages,
                stack=_stack(resolution, source), source=source)
