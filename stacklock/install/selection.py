"""What of a lock installs on one interpreter: ``packaging.pylock``'s ``select()``.

PEP 751 says how an installer picks from a lock (``requires-python``, then
``environments``, then each package's marker evaluated with ``extras`` and
``dependency_groups``, then ``vcs`` / ``directory`` / ``archive`` / the best
wheel / the sdist); :meth:`packaging.pylock.Pylock.select` is that algorithm,
so install asks it rather than re-implementing it, and every lock uv, pip, pdm
or pex writes is planned as the reference planner plans it. What stacklock adds
is the words (a refusal naming the package, a note for each sdist uv builds
because no wheel fits) and what uv needs told: the files it checks by sha256,
what it may build (:func:`build_flags`), ``--extra``/``--group`` (:class:`Wanted`).
The two lock-wide checks come first, one preflight line each
(:func:`stacklock.install.preflight.check_lock_fits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.pylock import (
    PackageArchive,
    PackageDirectory,
    PackageSdist,
    PackageVcs,
    PackageWheel,
    PylockSelectError,
)

from stacklock.errors import LockError
from stacklock.install.inputs import Interpreter, Wanted

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from stacklock.lock import Lock, LockedPackage

__all__ = [
    "Interpreter",
    "Selected",
    "Wanted",
    "build_flags",
    "refuse_builds",
    "refuse_unhashed",
    "select_packages",
    "source_kind",
]

Source = PackageVcs | PackageDirectory | PackageArchive | PackageWheel | PackageSdist


@dataclass(frozen=True, kw_only=True)
class Selected:
    """One package that installs, and what it installs from."""

    package: LockedPackage
    source: Source

    @property
    def kind(self) -> str:
        return source_kind(self.source)

    @property
    def built(self) -> bool:
        """uv builds it (an sdist, a vcs checkout, a directory, an archive that
        is not a wheel) rather than unpacking a wheel."""
        if isinstance(self.source, PackageWheel):
            return False
        if isinstance(self.source, PackageArchive):
            name = self.source.url or self.source.path or ""
            return not name.split("?")[0].endswith(".whl")
        return True


def source_kind(source: Source) -> str:
    """The PEP 751 table the source is: wheel, sdist, vcs, directory, archive."""
    return {PackageWheel: "wheel", PackageSdist: "sdist", PackageVcs: "vcs",
            PackageDirectory: "directory", PackageArchive: "archive"}[type(source)]


def select_packages(lock: Lock, interp: Interpreter, *,
                    extras: Collection[str] = (),
                    groups: Collection[str] | None = None) -> list[Selected]:
    """What ``Pylock.select()`` installs for ``interp`` with ``extras`` and
    ``groups`` (None: the lock's ``default-groups``), in lock order. An
    interpreter whose tags the probe could not derive (not manylinux) is
    given this process's own tags, as ``select()`` defaults to."""
    by_entry = {id(p.entry): p for p in lock.packages}
    try:
        chosen = list(lock.to_pylock().select(
            environment=dict(interp.marker_env),  # type: ignore[arg-type]
            tags=interp.tags or None,
            extras=extras, dependency_groups=groups))
    except PylockSelectError as exc:
        raise LockError(f"{lock.path}: {exc}", hint=_select_hint(str(exc))) from None
    return [Selected(package=by_entry[id(entry)], source=source)
            for entry, source in chosen]


def _select_hint(message: str) -> str:
    if message.startswith("Undeclared"):
        return "name an extra or group the lock declares (its extras, " \
            "dependency-groups)"
    if "No wheel found" in message:
        return "install with a --python the lock has wheels for, or re-lock for it"
    return "install with a --python the lock was written for"


def refuse_unhashed(selected: Sequence[Selected], lock: Lock) -> None:
    """Every file picked has a sha256 for uv to check (PEP 751 allows any
    algorithm; uv ignores sha1 and md5 would be a weak pin), and nothing is a
    snapshot's record of an installed distribution."""
    from stacklock.lock import wheel_sha256

    index = {id(p): i for i, p in enumerate(lock.packages)}
    for s in selected:
        where = f"{lock.path}: packages[{index[id(s.package)]}] ({s.package.name})"
        if isinstance(s.source, PackageDirectory) and lock.snapshot is not None:
            raise LockError(f"{where}: neither a wheel nor an sdist: a snapshot "
                            "records where it was installed, not a source",
                            hint="install the lock the environment came from")
        if isinstance(s.source, PackageVcs | PackageDirectory):
            continue
        if wheel_sha256(s.source) is None:
            part = s.kind if s.kind != "wheel" else \
                f"wheels[{s.package.wheels.index(s.source)}]"
            found = ", ".join(sorted(s.source.hashes)) or "none"
            raise LockError(f"{where}.{part}: no sha256 hash (found: {found}); "
                            "stacklock installs only what uv checks by sha256",
                            hint="lock it again with a sha256 for every file")


def build_flags(selected: Sequence[Selected], *, config: Sequence[str] = ()
                ) -> tuple[str, ...]:
    """uv's flags so that exactly what the plan builds is built: ``--no-build``
    when nothing is, else every package binary-only but those, and ``config``
    (the ``--config-file`` of :func:`~stacklock.install.plan.build_config`)."""
    built = sorted({str(s.package.name) for s in selected if s.built})
    if not built:
        return ("--no-build",)
    return ("--only-binary", ":all:",
            *(flag for name in built for flag in ("--no-binary", name)), *config)


def refuse_builds(selected: Sequence[Selected], lock_path: str) -> None:
    """``--no-build``: the first package uv would have to build, refused."""
    for s in selected:
        if s.built:
            raise LockError(
                f"{lock_path}: {s.package.name}: installs from its {s.kind} "
                f"({describe(s.source, lock_path)}), which uv would build; "
                "--no-build refuses", hint="leave out --no-build, or install with "
                "a --python the lock has a wheel of it for")


def describe(source: Source, lock_path: str) -> str:
    """The source in a few words: a file name, ``url@commit``, a folder."""
    if isinstance(source, PackageVcs):
        where = source.url or source.path or "?"
        return f"{where}@{source.commit_id}"
    if isinstance(source, PackageDirectory):
        return str(local_path(source.path, lock_path))
    if isinstance(source, PackageArchive):
        return source.url or source.path or "?"
    return source.filename


def local_path(path: str, lock_path: str) -> Path:
    """A ``path`` of the lock, absolute (PEP 751: relative to the lock's folder)."""
    p = Path(path)
    return p if p.is_absolute() else Path(lock_path).resolve().parent / p


def selection_notes(selected: Sequence[Selected], interp: Interpreter) -> list[str]:
    """One line for each package whose wheels all miss ``interp``, and one for
    the sources PEP 751 gives no hash."""
    notes = [
        f"{s.package.name} {s.package.version}: no locked wheel fits python "
        f"{interp.version} on {interp.machine}; uv builds its sdist "
        f"{s.source.filename} for it"
        for s in selected
        if isinstance(s.source, PackageSdist) and s.package.wheels
    ]
    unhashed = sorted(f"{s.package.name} ({s.kind})" for s in selected
                      if isinstance(s.source, PackageVcs | PackageDirectory))
    if unhashed:
        notes.append(f"no hash in PEP 751 for {', '.join(unhashed)}: uv runs without "
                     "--require-hashes (a vcs entry is pinned by its commit, a "
                     "directory installs as it is when install runs) and still "
                     "checks every hash the lock gives")
    return notes
