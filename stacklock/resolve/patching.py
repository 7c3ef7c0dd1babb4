"""The profile's ``[[patches]]`` applied to the resolution's wheels, in memory.

For each patched package: the locked wheel's RECORD and the files its patches
name are read (:func:`stacklock.metadata.members.read_wheel_files`: the artifact
store or a local file, else range reads of just those members), each file is
checked against RECORD, the patches are applied in order
(:mod:`stacklock.patches`), and each :class:`~stacklock.lock.tables.PatchRecord`
keeps the sha256 of every file it changed. A patch of a package the resolution
does not hold, of an sdist or a source tree, of a file RECORD does not list, or
of a binary file is refused (exit 2); one whose versions exclude the locked one,
or that does not apply, is a conflict (exit 1). Nothing is written either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock._fs import atomic_write_bytes
from stacklock.errors import PatchError, ResolutionError
from stacklock.lock.tables import PatchedFile, PatchRecord
from stacklock.patches import apply_patches
from stacklock.record import sha256_of_digest

if TYPE_CHECKING:
    from collections.abc import Sequence

    import httpx

    from stacklock.patches import Patch
    from stacklock.profile import PatchSpec
    from stacklock.resolve.result import Resolution, ResolvedPackage
    from stacklock.store import ArtifactStore

__all__ = ["PatchedResolution", "apply_declared", "record_path"]


@dataclass(frozen=True, kw_only=True)
class PatchedResolution:
    resolution: Resolution
    lines: tuple[str, ...]  # what resolve prints about each patch
    bytes_read: int = 0


def record_path(patch: Path, lock: Path) -> str:
    """The patch file's path as the lock records it: relative to the lock's
    folder, with ``/``."""
    return Path(os.path.relpath(patch.resolve(), lock.resolve().parent)).as_posix()


def apply_declared(resolution: Resolution, *, lock: Path, http: httpx.Client,
                   store: ArtifactStore, offline: bool,
                   cache: Path) -> PatchedResolution:
    """``resolution`` with each patched package's :class:`PatchRecord`\\ s; what
    a wheel and its patches give is kept under ``cache/patched/``."""
    specs = resolution.profile.patches
    by_name: dict[str, ResolvedPackage] = {p.name: p for p in resolution.packages}
    grouped: dict[str, list[tuple[int, PatchSpec]]] = {}
    for i, spec in enumerate(specs):
        if spec.package not in by_name:
            raise PatchError(
                f"{resolution.profile.path}: patches[{i}]: {spec.package} is not in "
                f"the lock ({spec.file})",
                hint="patch a package the profile's requirements bring in, or "
                "remove the patch")
        grouped.setdefault(spec.package, []).append((i, spec))
    lines: list[str] = []
    done: dict[str, ResolvedPackage] = {}
    total = 0
    for name, these in grouped.items():
        package, more, read = _patch_package(by_name[name], these, lock=lock,
                                             http=http, store=store,
                                             offline=offline, profile=resolution,
                                             cache=cache)
        done[name] = package
        lines.extend(more)
        total += read
    packages = tuple(done.get(p.name, p) for p in resolution.packages)
    return PatchedResolution(resolution=replace(resolution, packages=packages),
                             lines=tuple(lines), bytes_read=total)


def _patch_package(package: ResolvedPackage,
                   specs: Sequence[tuple[int, PatchSpec]], *, lock: Path,
                   http: httpx.Client, store: ArtifactStore, offline: bool,
                   profile: Resolution, cache: Path
                   ) -> tuple[ResolvedPackage, list[str], int]:
    version = str(package.version)
    where = profile.profile.path
    for i, spec in specs:
        if spec.versions is not None and not spec.versions.contains(
                package.version, prereleases=True):
            raise ResolutionError(
                f"{package.name} {version} is locked, and patches[{i}] "
                f"({spec.file}) is written for {package.name}{spec.versions}",
                hint=f"pin {package.name}{spec.versions} in the profile, or update "
                "the patch and its versions")
    wheel = package.wheel
    if wheel is None or package.is_sdist or package.direct is not None:
        raise PatchError(
            f"{where}: patches[{specs[0][0]}]: {package.name} {version} is locked as "
            "a direct reference or a source to build, and patches apply to the "
            "files of a wheel from an index",
            hint="lock a wheel of it from an index (no sdist, no direct reference)")
    key = _outcome_key(wheel.sha256, specs)
    outcome = _remembered(cache, key)
    read = 0
    if outcome is None:
        outcome, read = _apply(package, specs, http=http, store=store,
                               offline=offline, where=where)
        _remember(cache, key, outcome)
    records = []
    lines = []
    for (_i, spec), (files, notes) in zip(specs, outcome, strict=True):
        patch = _patch(spec)
        records.append(PatchRecord(
            path=record_path(spec.path, lock), sha256=patch.sha256,
            size=patch.size, reason=spec.reason,
            files=tuple(PatchedFile(path=p, sha256=h) for p, h in files)))
        lines.append(f"  patch: {package.name} {version}: {spec.file} "
                     f"({len(files)} file{'s' if len(files) != 1 else ''}): "
                     f"{spec.reason}")
        lines.extend(f"  patch note: {note}" for note in notes)
    return replace(package, patches=tuple(records)), lines, read


# per patch: the (path, sha256) of each file it leaves changed, and its notes
Outcome = list[tuple[list[tuple[str, str]], list[str]]]
_FORMAT = 1


def _apply(package: ResolvedPackage, specs: Sequence[tuple[int, PatchSpec]], *,
           http: httpx.Client, store: ArtifactStore, offline: bool,
           where: str | None) -> tuple[Outcome, int]:
    """The wheel's RECORD and patched files read, checked, patched in order."""
    from stacklock.metadata.members import read_wheel_files

    wheel = package.wheel
    assert wheel is not None
    version = str(package.version)
    paths = sorted({f.path for _, s in specs for f in _patch(s).files})
    found = read_wheel_files(
        http, filename=wheel.filename, url=wheel.url or None, sha256=wheel.sha256,
        size=wheel.size, wanted=paths, store=store, offline=offline)
    record = found.record.entries
    for i, spec in specs:
        for path in _patch(spec).paths:
            _check_listed(path, record, found.names, found.files,
                          what=f"{package.name} {version}: {spec.file}",
                          where=f"{where}: patches[{i}]")
    current = dict(found.files)
    outcome: Outcome = []
    for _i, spec in specs:
        changed, notes = apply_patches(current, [(_patch(spec), spec.file)],
                                       package=str(package.name), version=version)
        current.update(changed)
        outcome.append(([(p, hashlib.sha256(d).hexdigest())
                         for p, d in sorted(changed.items())], notes))
    return outcome, found.bytes_read


def _outcome_key(wheel: str, specs: Sequence[tuple[int, PatchSpec]]) -> str:
    """What an outcome depends on: the wheel's and each patch's bytes (in
    order), their names in notes, and the code that applies them."""
    from stacklock.codestamp import code_stamp

    parts = [_FORMAT, wheel, [(_patch(s).sha256, s.file) for _, s in specs],
             repr(code_stamp())]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _entry(cache: Path, key: str) -> Path:
    return cache / "patched" / f"{key}.json"


def _remembered(cache: Path, key: str) -> Outcome | None:
    """The outcome kept under ``key`` (a warm or --offline resolve reads no
    wheel again); None when there is none or it does not read as one."""
    from stacklock.bounded import Malformed, parse_json, read_regular

    try:
        data = parse_json(read_regular(_entry(cache, key), limit=1 << 20))
    except (OSError, Malformed):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    found = data.get("outcome")
    if not isinstance(found, list):
        return None
    try:
        return [([(str(p), str(h)) for p, h in files], [str(n) for n in notes])
                for files, notes in found]
    except (TypeError, ValueError):
        return None


def _remember(cache: Path, key: str, outcome: Outcome) -> None:
    with contextlib.suppress(OSError):  # a cache that cannot be written: read again
        atomic_write_bytes(_entry(cache, key), json.dumps(
            {"key": key, "outcome": outcome}).encode(), durable=False)


def _patch(spec: PatchSpec) -> Patch:
    assert spec.patch is not None, "load_profile reads every patch file"
    return spec.patch


def _check_listed(path: str, record: dict[str, str], names: frozenset[str],
                  files: dict[str, bytes], *, what: str, where: str) -> None:
    """``path`` is a file the wheel's RECORD lists, whose bytes match it."""
    if path not in record:
        folder = any(n.startswith(path.rstrip("/") + "/") for n in names)
        raise PatchError(
            f"{where}: {what}: {path} is " + ("a folder in the wheel" if folder
                                              else "not a file the wheel's RECORD "
                                              "lists"),
            hint="a patch changes files the wheel holds; check the path (relative "
            "to site-packages)")
    data = files.get(path)
    expected = sha256_of_digest(record[path])
    if data is None or expected != hashlib.sha256(data).hexdigest():
        raise PatchError(f"{where}: {what}: {path}: the wheel's bytes do not match "
                         "its RECORD", hint="the wheel is broken; lock another "
                         "version")
