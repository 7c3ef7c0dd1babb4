"""The lock's patches: checked before anything changes, applied inside the new
generation after ``uv pip sync`` and before it is verified and swapped in.

:func:`read_patches` reads each patch file the lock names (relative to the lock)
through the one patch reader and refuses one whose bytes are not the lock's
sha256 and size, before the venv is snapshotted or anything is built.
:func:`apply_to_generation` then, in the new generation's site-packages, checks
each file against the RECORD uv wrote (the wheel's bytes, as uv installed them),
applies the patches in order, refuses a result whose sha256 is not the one the
lock recorded, writes each file as a new file renamed over the old (uv may have
linked it from its cache: the cache's copy is never written through) and rewrites
the RECORD rows of the patched files, so RECORD is true again for pip, uv and
``importlib.metadata``. Any failure leaves the generation to be discarded and the
old venv current.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from stacklock._fs import atomic_write_bytes
from stacklock.errors import PatchError
from stacklock.patches import apply_patches, load_patch
from stacklock.record import load_record, rewrite_record, sha256_of_digest

if TYPE_CHECKING:
    from collections.abc import Iterable

    from stacklock.lock import Lock, LockedPackage
    from stacklock.lock.tables import PatchRecord
    from stacklock.patches import Patch
    from stacklock.store import ArtifactStore

__all__ = ["PackagePatches", "apply_to_generation", "patched_files_hold",
           "read_patches"]


@dataclass(frozen=True, kw_only=True)
class PackagePatches:
    """A package's patches as read from disk, each with its lock record."""

    name: str
    version: str
    patches: tuple[tuple[Patch, PatchRecord], ...]

    @property
    def final(self) -> dict[str, str]:
        """Each patched file's sha256 once every patch applied."""
        out: dict[str, str] = {}
        for _, record in self.patches:
            out.update({f.path: f.sha256 for f in record.files})
        return out


def read_patches(lock: Lock, names: Iterable[str] | None = None,
                 *, store: ArtifactStore | None = None) -> tuple[PackagePatches, ...]:
    """The patches of ``lock``'s packages (of ``names``, the ones the plan
    installs, when given), their files read relative to the lock's folder, or,
    where there is none, from ``store`` by sha256 (a pack put them there), and
    refused unless their bytes are the locked ones."""
    wanted = None if names is None else {canonicalize_name(n) for n in names}
    folder = Path(lock.path).resolve().parent
    out = []
    for package in lock.packages:
        if not package.tool.patches or (wanted is not None
                                        and package.name not in wanted):
            continue
        out.append(PackagePatches(
            name=package.name, version=str(package.version),
            patches=tuple((_read(package, r, folder, lock.path, store), r)
                          for r in package.tool.patches)))
    return tuple(out)


def _read(package: LockedPackage, record: PatchRecord, folder: Path,
          lock: str, store: ArtifactStore | None) -> Patch:
    path = folder / record.path
    if not path.exists() and store is not None:
        path = store.path_for(record.sha256) or _archived(
            store, record, PurePosixPath(record.path).name) or path
    patch = load_patch(path, where=str(path))
    if patch.sha256 != record.sha256 or patch.size != record.size:
        raise PatchError(
            f"{path}: the patch of {package.name} {package.version} is not the one "
            f"{lock} records (sha256 {patch.sha256}, {patch.size} bytes; the lock "
            f"has {record.sha256}, {record.size} bytes); nothing was changed",
            hint="restore the patch file the lock was resolved with, or resolve "
            "the lock again and review the diff")
    return patch


def _archived(store: ArtifactStore, record: PatchRecord, name: str) -> Path | None:
    """The patch file from the store's archive (``stacklock archive`` keeps
    the lock's patch files too), checked against its sha256."""
    if store.archive is None:
        return None
    from stacklock.http import make_http_client

    with make_http_client(timeout=60.0) as http:
        return store.fetch_archived(http, sha256=record.sha256, filename=name,
                                    size=record.size)


def _site_packages(generation: Path) -> Path:
    found = sorted(generation.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise PatchError(f"{generation}: expected one site-packages, found "
                         f"{len(found)}")
    return found[0]


def _dist_info(site: Path, name: str, version: str) -> Path:
    for entry in site.glob("*.dist-info"):
        dist, _, found = entry.name.removesuffix(".dist-info").partition("-")
        if canonicalize_name(dist) == name and found == version:
            return entry
    raise PatchError(f"{site}: {name} {version} is not installed there, and the "
                     "lock patches it")


def _regular(site: Path, relative: str) -> Path:
    """``site/relative``, refused unless a regular file inside ``site`` that is
    not reached through a symlink."""
    path = site / relative
    parent = path.parent.resolve()
    if not parent.is_relative_to(site.resolve()):
        raise PatchError(f"{path}: outside {site}", hint="reinstall the venv")
    try:
        mode = path.lstat().st_mode
    except OSError as exc:
        raise PatchError(f"{path}: cannot read the installed file: "
                         f"{exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise PatchError(f"{path}: not a regular file (a symlink or folder): "
                         "patches change regular files only")
    return path


def apply_to_generation(generation: Path,
                        packages: Iterable[PackagePatches]) -> list[str]:
    """Apply each package's patches in ``generation`` (see the module doc);
    returns a line per patch applied."""
    site = _site_packages(generation)
    lines = []
    for package in packages:
        dist_info = _dist_info(site, package.name, package.version)
        read = load_record(dist_info)
        if read is None:
            raise PatchError(f"{dist_info}: no RECORD, and the lock patches "
                             f"{package.name} {package.version}",
                             hint="install again")
        record = read.entries
        paths = sorted({f.path for p, _ in package.patches for f in p.files})
        files = {}
        for relative in paths:
            path = _regular(site, relative)
            data = path.read_bytes()
            expected = sha256_of_digest(record.get(relative, ""))
            if expected != hashlib.sha256(data).hexdigest():
                raise PatchError(
                    f"{path}: not the file {package.name} {package.version}'s RECORD "
                    "lists (changed since uv installed it, or not listed)",
                    hint="install again; a patched file must start as the wheel "
                    "has it")
            files[relative] = data
        for patch, lock_record in package.patches:
            changed, _ = apply_patches(files, [(patch, lock_record.path)],
                                       package=package.name, version=package.version)
            for f in lock_record.files:
                got = hashlib.sha256(changed.get(f.path, b"")).hexdigest()
                if f.path not in changed or got != f.sha256:
                    raise PatchError(
                        f"{package.name} {package.version}: {lock_record.path}: "
                        f"{f.path} patched is sha256 {got}, the lock records "
                        f"{f.sha256}", hint="resolve the lock again")
            files.update(changed)
            lines.append(f"patched {package.name} {package.version}: "
                         f"{lock_record.path} ({lock_record.reason})")
        for relative in paths:
            path = site / relative
            mode = stat.S_IMODE(path.stat().st_mode)
            # a new file renamed over the old one: never written through a link
            atomic_write_bytes(path, files[relative], durable=False)
            os.chmod(path, mode)
        atomic_write_bytes(dist_info / "RECORD", rewrite_record(
            read, {p: files[p] for p in paths}), durable=False)
    return lines


def patched_files_hold(generation: Path, lock: Lock) -> bool:
    """Whether every patched file of ``lock`` in ``generation`` has the sha256
    its last patch gives it (an already-installed venv is kept only then)."""
    try:
        site = _site_packages(generation)
        for package in lock.packages:
            final: dict[str, str] = {}
            for record in package.tool.patches:
                final.update({f.path: f.sha256 for f in record.files})
            for relative, sha256 in final.items():
                data = _regular(site, relative).read_bytes()
                if hashlib.sha256(data).hexdigest() != sha256:
                    return False
    except (PatchError, OSError):
        return False
    return True
