"""What an install will do, decided before anything is touched.

``make_plan`` is pure: the lock + options + what is already on disk in, an
:class:`InstallPlan` out. ``--dry-run`` prints exactly this plan, and the real run
executes exactly these commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.errors import LockError
from stacklock.install.inputs import Interpreter
from stacklock.install.layout import VenvLayout
from stacklock.install.uvsteps import BUILD_CONFIG_NAME, UV_LOCK_NAME, uv_commands
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from packaging.pylock import PackageSdist, PackageWheel
    from packaging.tags import Tag

    from stacklock.install.selection import Selected
    from stacklock.lock import CudaEntry, Lock, LockedPackage

__all__ = [
    "DRIVER_FLAGS",
    "Choices",
    "Download",
    "InstallPlan",
    "Interpreter",
    "applicable",
    "assemble",
    "best_wheel",
    "build_config",
    "make_plan",
    "toolkit_args",
]

# Flags that would make the runfile touch the kernel driver or its modules.
DRIVER_FLAGS = ("--driver", "--kernelobjects", "--run-nvidia-xconfig", "--dkms")


@dataclass(frozen=True, kw_only=True)
class Download:
    kind: str  # "wheel" | "sdist" | "vcs" | "directory" | "archive" | "runfile"
    filename: str
    url: str  # redacted
    size: int | None
    sha256: str
    cached: bool


@dataclass(frozen=True, kw_only=True)
class InstallPlan:
    lock_path: Path
    # the lock's bytes as read once, checked, at the start: the plan, uv's copy
    # and the generation's copy are all made from these, never from a re-read
    lock_bytes: bytes = field(repr=False)
    venv: Path
    generation: int
    generation_dir: Path
    replaces: Path | None  # the environment now at ``venv``, if any
    replaced_generation: int | None  # its generation number (for --rollback)
    snapshot_path: Path | None
    uv_lock_path: Path  # the pylock copy uv installs from
    python: str
    packages: tuple[tuple[str, str], ...]
    downloads: tuple[Download, ...]
    commands: tuple[tuple[str, ...], ...]
    toolkit: CudaEntry | None
    toolkit_prefix: Path | None
    runfile_command: tuple[str, ...] | None
    activation_path: Path
    link_cuda: Path | None
    local_wheels: Mapping[str, str] = field(default_factory=dict)  # sha256 -> path

    @property
    def download_bytes(self) -> int:
        return sum(d.size or 0 for d in self.downloads if not d.cached)

    def to_dict(self) -> dict[str, object]:
        return {
            "lock": str(self.lock_path),
            "venv": str(self.venv),
            "generation": self.generation,
            "generation_dir": str(self.generation_dir),
            "replaces": str(self.replaces) if self.replaces else None,
            "snapshot": str(self.snapshot_path) if self.snapshot_path else None,
            "python": self.python,
            "packages": [{"name": n, "version": v} for n, v in self.packages],
            "downloads": [
                {
                    "kind": d.kind,
                    "filename": d.filename,
                    "url": d.url,
                    "size": d.size,
                    "sha256": d.sha256,
                    "cached": d.cached,
                }
                for d in self.downloads
            ],
            "download_bytes": self.download_bytes,
            "commands": [list(c) for c in self.commands],
            "runfile_command": list(self.runfile_command)
            if self.runfile_command
            else None,
            "toolkit_prefix": str(self.toolkit_prefix) if self.toolkit_prefix else None,
            "activation": str(self.activation_path),
            "link_cuda": str(self.link_cuda) if self.link_cuda else None,
        }


def applicable(lock: Lock, env: Mapping[str, str], *, extras: Collection[str] = (),
               groups: Collection[str] | None = None) -> list[LockedPackage]:
    """The packages whose marker holds in ``env`` (what uv will install; see
    :meth:`stacklock.lock.Lock.applicable`)."""
    return lock.applicable(env, extras=extras, groups=groups)


_RANK: list[tuple[Sequence[Tag], dict[Tag, int]]] = []


def _rank(tags: Sequence[Tag]) -> dict[Tag, int]:
    """Tag -> its place in ``tags``, built once per interpreter's tag list (the
    same object for every package of a lock), not per package: ~1000 tags
    against a 200-package lock. Keyed by identity: hashing the list costs as
    much as building the map."""
    if _RANK and _RANK[0][0] is tags:
        return _RANK[0][1]
    rank = {tag: i for i, tag in enumerate(tags)}
    _RANK[:] = [(tags, rank)]
    return rank


def best_wheel(pkg: LockedPackage, tags: Sequence[Tag]
               ) -> PackageWheel | PackageSdist | None:
    """The wheel uv picks: the one whose best tag comes first in ``tags``; the
    sdist of a package locked as one (uv builds it). Used by pack, whose locks
    stacklock wrote; install asks ``Pylock.select()``."""
    if pkg.sdist is not None:
        return pkg.sdist
    from stacklock.lock import wheel_tags

    rank = _rank(tags)
    scored = [
        (min(ranks), w.filename, i)
        for i, w in enumerate(pkg.wheels)
        if (ranks := [rank[t] for t in wheel_tags(w) if t in rank])
    ]
    return pkg.wheels[min(scored)[2]] if scored else None


def build_config(packages: Sequence[LockedPackage]) -> str | None:
    """uv's config for the locked sdists built against the locked runtime
    (``match-runtime``): ``extra-build-dependencies`` with ``match-runtime =
    true``, so uv's build environment gets the version this lock installs."""
    rows = [
        f'"{p.name}" = [' + ", ".join(
            f'{{ requirement = "{n}", match-runtime = true }}'
            for n in p.tool.match_runtime) + "]"
        for p in sorted(packages, key=lambda p: p.name)
        if p.sdist is not None and p.tool.match_runtime]
    if not rows:
        return None
    return "[pip.extra-build-dependencies]\n" + "\n".join(rows) + "\n"


def toolkit_args(toolkit: CudaEntry, prefix: Path, tmpdir: Path) -> tuple[str, ...]:
    """The lock's install-args with the prefix pinned and never a driver flag.

    ``--silent``, ``--toolkit`` and ``--override`` are always there, whatever the
    lock recorded (see :func:`stacklock.cuda.lock_entry.install_args` for why
    ``--override``). ``--tmpdir`` keeps the runfile's extraction out of a shared,
    maybe noexec /tmp.
    """
    args = [
        a
        for a in toolkit.install_args
        if not a.startswith(("--toolkitpath", "--tmpdir"))
    ]
    bad = [a for a in args if a.split("=", 1)[0] in DRIVER_FLAGS]
    if bad:
        raise LockError(
            f"tool.stacklock.cuda.install-args: driver flag {bad[0]!r} refused",
            hint="stacklock installs the toolkit only; drop the flag from the profile",
        )
    for required in ("--silent", "--toolkit", "--override"):
        if required not in args:
            args.append(required)
    args += [f"--toolkitpath={prefix}", f"--tmpdir={tmpdir}"]
    return tuple(args)


def _download(chosen: Selected, lock_path: str,
              cached: Mapping[str, Path]) -> tuple[Download, str | None]:
    """The download of one selected package, and its stored copy, if any. A
    vcs or directory source has no hash (PEP 751): the commit id pins a vcs
    checkout; uv reads a directory as it is."""
    from packaging.pylock import PackageArchive, PackageDirectory, PackageVcs

    from stacklock.install.selection import describe
    from stacklock.lock import wheel_sha256

    source = chosen.source
    if isinstance(source, PackageVcs | PackageDirectory):
        url = describe(source, lock_path)
        if isinstance(source, PackageVcs):
            url = f"{source.type}+{redact_url(url)}"
        return Download(kind=chosen.kind, filename=describe(source, lock_path),
                        url=url, size=None, sha256="",
                        cached=isinstance(source, PackageDirectory)), None
    sha256 = wheel_sha256(source) or ""
    hit = cached.get(sha256)
    url = source.url or source.path or ""
    filename = (source.filename if not isinstance(source, PackageArchive)
                else url.rsplit("/", 1)[-1].split("?")[0])
    return Download(
        kind=chosen.kind, filename=filename, url=redact_url(url), size=source.size,
        sha256=sha256,
        cached=hit is not None or source.url is None,  # a local path
    ), str(hit) if hit is not None else None


def _downloads(selected: Sequence[Selected], lock_path: str,
               cached: Mapping[str, Path]) -> tuple[list[Download], dict[str, str]]:
    """What each selected package installs from, and those already stored."""
    downloads = []
    local: dict[str, str] = {}
    for chosen in selected:
        download, hit = _download(chosen, lock_path, cached)
        downloads.append(download)
        if hit is not None:
            local[download.sha256] = hit
    return downloads, local


@dataclass(frozen=True, kw_only=True)
class _ToolkitPlan:
    prefix: Path | None = None
    command: tuple[str, ...] | None = None
    download: Download | None = None


def _toolkit_plan(
    toolkit: CudaEntry | None,
    *,
    toolkit_prefix: Path | None,
    present: bool,
    runfile_cached: bool,
    work: Path,
) -> _ToolkitPlan:
    """Where a runfile toolkit goes and, unless it is there already, how."""
    if toolkit is None or toolkit.source != "runfile":
        return _ToolkitPlan()
    prefix = toolkit_prefix or Path(str(toolkit.prefix))
    if present:
        return _ToolkitPlan(prefix=prefix)
    assert toolkit.url is not None and toolkit.sha256 is not None
    download = Download(
        kind="runfile",
        filename=str(toolkit.runfile),
        url=redact_url(toolkit.url),
        size=toolkit.size,
        sha256=toolkit.sha256,
        cached=runfile_cached,
    )
    command = (
        "sh",
        f"<store>/{toolkit.sha256}",
        *toolkit_args(toolkit, prefix, work / "runfile-tmp"),
    )
    return _ToolkitPlan(prefix=prefix, command=command, download=download)


@dataclass(frozen=True, kw_only=True)
class Choices:
    """What the lock and the interpreter alone decide: the packages that apply,
    the file each installs from, uv's build flags. A pure function of the lock's
    bytes and the interpreter, so :mod:`~stacklock.install.replay` can remember it."""

    packages: tuple[tuple[str, str], ...]
    downloads: tuple[Download, ...]
    build: tuple[str, ...]
    selection: tuple[str, ...] = ()  # --extra/--group as uv takes them
    hashes: bool = True  # --require-hashes: no vcs or directory source


def assemble(
    choices: Choices,
    *,
    lock_path: Path,
    lock_bytes: bytes,
    venv: Path,
    python: str,
    uv: str,
    generation: int,
    replaces: Path | None,
    replaced_generation: int | None,
    local_wheels: Mapping[str, str],
    toolkit: CudaEntry | None = None,
    kit: _ToolkitPlan | None = None,
    link_cuda: Path | None = None,
) -> InstallPlan:
    """The plan of ``choices`` installed as generation ``generation`` of ``venv``."""
    layout = VenvLayout(venv=venv)
    gen_dir = layout.generation_dir(generation)
    uv_lock = layout.work_dir(generation) / UV_LOCK_NAME
    kit = kit or _ToolkitPlan()
    downloads = choices.downloads + ((kit.download,) if kit.download else ())
    replaced = replaced_generation if replaces is not None else None
    return InstallPlan(
        lock_path=lock_path,
        lock_bytes=lock_bytes,
        venv=venv,
        generation=generation,
        generation_dir=gen_dir,
        replaces=replaces,
        replaced_generation=replaced,
        snapshot_path=layout.snapshot_path(replaced) if replaced is not None else None,
        uv_lock_path=uv_lock,
        python=python,
        packages=choices.packages,
        downloads=downloads,
        commands=uv_commands(uv, python, gen_dir, uv_lock, choices.build,
                             options=choices.selection,
                             require_hashes=choices.hashes),
        toolkit=toolkit,
        toolkit_prefix=kit.prefix,
        runfile_command=kit.command,
        activation_path=gen_dir / "stacklock-activate.sh",
        link_cuda=link_cuda if kit.prefix is not None else None,
        local_wheels=local_wheels,
    )


def make_plan(
    lock: Lock,
    *,
    lock_bytes: bytes,
    venv: Path,
    interpreter: Interpreter,
    uv: str,
    generation: int,
    replaces: Path | None,
    replaced_generation: int | None,
    cached: Mapping[str, Path],
    toolkit_prefix: Path | None,
    install_toolkit: bool,
    toolkit_present: bool,
    link_cuda: Path | None,
    runfile_cached: bool,
    selected: Sequence[Selected],
    selection: Sequence[str] = (),
) -> InstallPlan:
    """The whole install as data. ``cached`` maps sha256 -> a file already here;
    ``replaced_generation`` is the number the current venv has (or gets, when a
    plain venv is adopted), which names its snapshot. ``selected`` is what
    :func:`~stacklock.install.selection.select_packages` chose, ``selection``
    the ``--extra``/``--group`` options uv gets to choose the same."""
    from stacklock.install.selection import build_flags

    downloads, local = _downloads(selected, lock.path, cached)
    config = VenvLayout(venv=venv).work_dir(generation) / BUILD_CONFIG_NAME
    choices = Choices(
        packages=tuple((s.package.name, str(s.package.version or ""))
                       for s in selected),
        downloads=tuple(downloads), build=build_flags(selected, config=(
            ("--config-file", str(config))
            if build_config([s.package for s in selected]) else ())),
        selection=tuple(selection),
        hashes=not any(d.kind in ("vcs", "directory") for d in downloads))
    toolkit = lock.cuda if install_toolkit and lock.cuda else None
    kit = _toolkit_plan(toolkit, toolkit_prefix=toolkit_prefix,
                        present=toolkit_present, runfile_cached=runfile_cached,
                        work=VenvLayout(venv=venv).work_dir(generation))
    return assemble(choices, lock_path=Path(lock.path), lock_bytes=lock_bytes,
                    venv=venv,
                    python=interpreter.path, uv=uv, generation=generation,
                    replaces=replaces, replaced_generation=replaced_generation,
                    local_wheels=local, toolkit=toolkit, kit=kit, link_cuda=link_cuda)
