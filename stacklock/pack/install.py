"""``stacklock install PACK``: check every byte of the pack, then install its lock
exactly as ``stacklock install LOCK`` does, from the artifact store, and validate.

The lock comes first: unpacked, checked against the manifest and read once, as any
lock is (:func:`unpack_lock`; ``fleet install`` reads it so before any host gets the
pack). Nothing else is written before every file in the pack has matched its
sha256: the files are unpacked into a scratch folder beside the store and moved in
only after the last one checked out. A venv that already matches the lock is left
as it is.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.markers import default_environment

from stacklock._fs import cache_dir as default_cache_dir
from stacklock.errors import PackError, StacklockError
from stacklock.install.inputs import Wanted
from stacklock.install.layout import VenvLayout
from stacklock.install.plan import applicable
from stacklock.install.preflight import toolkit_installed
from stacklock.install.read import read_installable
from stacklock.install.run import InstallResult, install_lock
from stacklock.lock import wheel_sha256
from stacklock.lockbytes import read_lock_bytes
from stacklock.pack.boot import node_needs
from stacklock.pack.format import (
    Manifest,
    check_space,
    copy_member,
    read_manifest,
    scratch_dir,
)
from stacklock.store import ArtifactStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from stacklock.lock import Lock
    from stacklock.validate.report import ValidateResult

__all__ = [
    "PackInstallResult",
    "check_carried",
    "check_pack",
    "install_pack",
    "render_pack_install",
    "unpack_lock",
    "unpack_verified",
    "venv_matches",
]


@dataclass(frozen=True, kw_only=True)
class PackInstallResult:
    pack: Path
    venv: Path
    skipped: bool  # the venv already matched the lock
    install: InstallResult | None
    validation: ValidateResult | None

    @property
    def exit_code(self) -> int:
        return self.validation.exit_code if self.validation is not None else 0

    def to_dict(self) -> dict[str, Any]:
        return {"pack": str(self.pack), "venv": str(self.venv),
                "skipped": self.skipped,
                "install": self.install.to_dict() if self.install else None,
                "validation": self.validation.to_dict() if self.validation else None}


def unpack_lock(pack: Path, manifest: Manifest, lock: Path) -> tuple[bytes, Lock]:
    """The pack's lock, unpacked to ``lock`` (checked against the manifest's
    sha256, replaced whole) and read once as ``stacklock install`` reads a lock
    (:func:`~stacklock.lockbytes.read_lock_bytes`, then the one strict reader):
    its bytes and the lock. Before anything else of the pack is unpacked, and
    what ``fleet install`` reads before any host gets the pack."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with scratch_dir(lock.parent) as scratch:
        copy_member(pack, manifest.lock, scratch / "lock")
        os.replace(scratch / "lock", lock)
    content = read_lock_bytes(lock)  # once: what is checked is what installs
    if hashlib.sha256(content).hexdigest() != manifest.lock_sha256:
        raise PackError(f"{lock}: changed since it was unpacked from {pack}",
                        hint="install the pack again")
    return content, read_installable(lock, content)


def check_pack(pack: Path, *, cache: Path | None = None) -> Lock:
    """``pack``'s manifest and lock, read and checked as ``stacklock install
    PACK`` reads them (the lock unpacked where that puts it): a fleet refuses a
    pack before any host gets it."""
    pack = Path(os.path.abspath(pack))
    manifest = read_manifest(pack)
    cache = cache or default_cache_dir()
    lock = cache / "packs" / manifest.lock_sha256 / manifest.lock.name
    return unpack_lock(pack, manifest, lock)[1]


def unpack_verified(pack: Path, manifest: Manifest, store: ArtifactStore, *,
                    lock_to: Path | None,
                    on_bytes: Callable[[int, int], None] | None = None) -> None:
    """Every wheel, patch file and the runfile into ``store`` (install reads a
    patch from there by its sha256), the lock to ``lock_to`` (None: only
    checked, :func:`unpack_lock` put it there); all or nothing: one altered file
    and the store is left exactly as it was."""
    total = manifest.payload_size
    done = 0

    def count(n: int) -> None:
        nonlocal done
        done += n
        if on_bytes is not None:
            on_bytes(done, total)

    with scratch_dir(store.root / "tmp") as scratch:
        copy_member(pack, manifest.lock, None if lock_to is None else scratch / "lock",
                    progress=count)
        ready = []
        for member in manifest.members:
            if member.kind not in ("wheel", "runfile", "patch"):
                continue
            if store.has(member.sha256):
                copy_member(pack, member, None, progress=count)  # still checked
                continue
            ready.append((member, scratch / member.sha256))
            copy_member(pack, member, ready[-1][1], progress=count)
        for member, path in ready:
            store.adopt(path, member.sha256)
        if lock_to is not None:
            lock_to.parent.mkdir(parents=True, exist_ok=True)
            os.replace(scratch / "lock", lock_to)


def check_carried(lock: Lock, manifest: Manifest, pack: Path, *,
                  toolkit_prefix: Path | None) -> None:
    """Refuse a pack that lacks a file its lock installs: a pack install never
    reaches for the network. Every package whose marker holds on the node (the
    lock's target, else this host) needs one of its files in the pack; the
    runfile may be missing only where its toolkit is installed already."""
    carried = {m.sha256 for m in manifest.members}
    env = (lock.target.marker_environment() if lock.target is not None
           else {k: str(v) for k, v in default_environment().items()})
    for pkg in applicable(lock, env):
        files = pkg.files
        if not any((sha := wheel_sha256(f)) and sha in carried for f in files):
            names = ", ".join(f.filename for f in files) or "no file"
            raise PackError(
                f"{pack}: the lock installs {pkg.name} {pkg.version} ({names}) but "
                "the pack does not carry it; nothing installed (a pack install "
                "never downloads)",
                hint="make the pack again with `stacklock pack` from this lock")
        for patch in pkg.tool.patches:
            if patch.sha256 not in carried:
                raise PackError(
                    f"{pack}: the lock patches {pkg.name} {pkg.version} with "
                    f"{patch.path}, which the pack does not carry; nothing installed",
                    hint="make the pack again with `stacklock pack` from this lock")
    cuda = lock.cuda
    if cuda is None or cuda.source != "runfile" or manifest.of_kind("runfile"):
        return
    prefix = toolkit_prefix or Path(cuda.prefix or "")
    if not toolkit_installed(prefix, cuda.version):
        raise PackError(
            f"{pack}: the lock installs the CUDA {cuda.version} toolkit "
            f"({cuda.runfile}) at {prefix}, which the pack does not carry (packed "
            "with --no-toolkit) and which is not installed there; nothing installed",
            hint="install the toolkit first, or pack without --no-toolkit")


def venv_matches(lock: Lock, venv: Path, *, toolkit_prefix: Path | None) -> bool:
    """Does ``venv`` hold exactly the lock (names, versions, wheel hashes) and is
    its runfile toolkit, if any, in place?"""
    from stacklock.validate.checks import PASS, check_distributions, check_wheel_hashes
    from stacklock.validate.run import read_distributions

    python = venv / "bin" / "python"
    if not python.exists():
        return False
    cuda = lock.cuda
    if cuda is not None and cuda.source == "runfile":
        prefix = toolkit_prefix or Path(cuda.prefix or "")
        if not toolkit_installed(prefix, cuda.version):
            return False
    try:
        dists = read_distributions(python)
    except StacklockError:
        return False
    return all(check.status == PASS for check in (
        check_distributions(lock, dists), check_wheel_hashes(lock, dists)))


def install_pack(
    pack: str | Path,
    *,
    venv: Path,
    python: str | None = None,
    toolkit_prefix: Path | None = None,
    allow_no_gpu: bool = False,
    report_dir: Path | None = None,
    cache: Path | None = None,
    validate: bool = True,
    on_bytes: Callable[[int, int], None] | None = None,
    unknown_runfile: bool = False,
    on_notice: Callable[[str], None] | None = None,
) -> PackInstallResult:
    """Check, install (unless the venv already matches), validate.
    ``unknown_runfile``: a runfile the catalog does not know may run
    (``--allow-unknown-runfile``); ``on_notice`` as for install_lock."""
    pack = Path(os.path.abspath(pack))
    venv = Path(os.path.abspath(venv))
    manifest = read_manifest(pack)
    cache = cache or default_cache_dir()
    check_space(node_needs(manifest, cache=cache, venv=venv,
                           toolkit_prefix=toolkit_prefix), pack)
    store = ArtifactStore(cache / "artifacts")
    lock = cache / "packs" / manifest.lock_sha256 / manifest.lock.name
    content, locked = unpack_lock(pack, manifest, lock)  # before any other file
    check_carried(locked, manifest, pack, toolkit_prefix=toolkit_prefix)
    unpack_verified(pack, manifest, store, lock_to=None, on_bytes=on_bytes)
    skipped = venv_matches(locked, venv, toolkit_prefix=toolkit_prefix)
    installed = None
    if not skipped:
        installed = install_lock(lock, venv=venv, python=python,
                                 toolkit_prefix=toolkit_prefix,
                                 allow_no_gpu=allow_no_gpu, validate=False,
                                 cache=cache, prefetch=True, content=content,
                                 wanted=Wanted(unknown_runfile=unknown_runfile),
                                 on_notice=on_notice)
    validation = None
    if validate:
        from stacklock.validate.run import validate as run_validate

        validation = run_validate(
            locked, venv=venv, toolkit_prefix=toolkit_prefix,
            allow_no_gpu=allow_no_gpu,
            report_dir=report_dir or VenvLayout(venv=venv).state_dir / "validate")
    return PackInstallResult(pack=pack, venv=venv, skipped=skipped,
                             install=installed, validation=validation)


def render_pack_install(result: PackInstallResult) -> str:
    from stacklock.install.render import render_install
    from stacklock.validate.report import render_text

    if result.skipped:
        lines = [f"{result.venv} already matches the lock in {result.pack.name}; "
                 "install skipped"]
    else:
        assert result.install is not None
        lines = [render_install(result.install)]
    if result.validation is not None:
        lines.append(render_text(result.validation))
    return "\n".join(lines)

