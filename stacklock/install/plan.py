"""What an install will do, decided before anything is touched.

``read_lock`` turns a PEP 751 lock (plus its ``[tool.stacklock]`` tables) into the
few facts install needs; ``make_plan`` is pure: lock + options + what is already on
disk in, an :class:`InstallPlan` out. ``--dry-run`` prints exactly this plan, and
the real run executes exactly these commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import parse_wheel_filename

from stacklock.errors import LockError
from stacklock.install.venv import VenvLayout
from stacklock.lockfile import read_lock_file
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from packaging.markers import Marker
    from packaging.specifiers import SpecifierSet
    from packaging.tags import Tag

__all__ = [
    "Download",
    "InstallPlan",
    "Interpreter",
    "LockInfo",
    "LockedPackage",
    "LockedToolkit",
    "LockedWheel",
    "make_plan",
    "read_lock",
]

# Flags that would make the runfile touch the kernel driver or its modules.
DRIVER_FLAGS = ("--driver", "--kernelobjects", "--run-nvidia-xconfig", "--dkms")


@dataclass(frozen=True, kw_only=True)
class LockedWheel:
    filename: str
    url: str | None
    path: str | None
    sha256: str
    size: int | None
    tags: frozenset[Tag]


@dataclass(frozen=True, kw_only=True)
class LockedPackage:
    name: str
    version: str
    marker: Marker | None
    wheels: tuple[LockedWheel, ...]


@dataclass(frozen=True, kw_only=True)
class LockedToolkit:
    """``[tool.stacklock.cuda]``; ``source`` "pypi" means wheels carry it."""

    version: str
    source: str
    runfile: str | None = None
    url: str | None = None
    size: int | None = None
    md5: str | None = None
    sha256: str | None = None
    prefix: str | None = None
    install_args: tuple[str, ...] = ()
    min_driver: str | None = None


@dataclass(frozen=True, kw_only=True)
class LockInfo:
    path: Path
    requires_python: SpecifierSet | None
    environments: tuple[Marker, ...]
    target: Mapping[str, Any]
    packages: tuple[LockedPackage, ...]
    toolkit: LockedToolkit | None
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def python_request(self) -> str | None:
        """What to ask ``uv python find`` for: the target's python, else the range."""
        if self.target.get("python"):
            return str(self.target["python"])
        return str(self.requires_python) if self.requires_python else None


@dataclass(frozen=True, kw_only=True)
class Interpreter:
    """The python the new venv is built from, as it reports itself."""

    path: str
    version: str
    machine: str
    glibc: tuple[int, int] | None
    marker_env: Mapping[str, str]
    tags: tuple[Tag, ...]


@dataclass(frozen=True, kw_only=True)
class Download:
    kind: str  # "wheel" | "runfile"
    filename: str
    url: str  # redacted
    size: int | None
    sha256: str
    cached: bool


@dataclass(frozen=True, kw_only=True)
class InstallPlan:
    lock_path: Path
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
    toolkit: LockedToolkit | None
    toolkit_prefix: Path | None
    runfile_command: tuple[str, ...] | None
    activation_path: Path
    link_cuda: Path | None
    local_wheels: Mapping[str, str] = field(default_factory=dict)  # sha256 -> path

    @property
    def download_bytes(self) -> int:
        return sum(d.size or 0 for d in self.downloads if not d.cached)

    def to_dict(self) -> dict[str, Any]:
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


def _lock_error(path: Path, message: str, hint: str | None = None) -> LockError:
    return LockError(f"{path}: {message}", hint=hint)


def read_lock(path: Path) -> LockInfo:
    """Parse and check a lock: valid PEP 751, and a sha256 for every wheel."""
    lockfile = read_lock_file(path)
    data, pylock = lockfile.data, lockfile.pylock
    tool = lockfile.stacklock or {}
    packages = []
    for i, pkg in enumerate(pylock.packages):
        where = f"packages[{i}] ({pkg.name})"
        if pkg.version is None:
            raise _lock_error(path, f"{where}: no version", "re-resolve the lock")
        if not pkg.wheels:
            raise _lock_error(
                path,
                f"{where}: no wheel (install never builds from source)",
                "pin a version that has a wheel for the target",
            )
        wheels = []
        for j, wheel in enumerate(pkg.wheels):
            sha = (wheel.hashes or {}).get("sha256")
            if not sha:
                raise _lock_error(
                    path,
                    f"{where}.wheels[{j}]: no sha256 hash",
                    "re-resolve: stacklock hashes every wheel it locks",
                )
            filename = wheel.filename
            wheels.append(
                LockedWheel(
                    filename=filename,
                    url=wheel.url,
                    path=wheel.path,
                    sha256=sha.lower(),
                    size=wheel.size,
                    tags=parse_wheel_filename(filename)[3],
                )
            )
        packages.append(
            LockedPackage(
                name=str(pkg.name),
                version=str(pkg.version),
                marker=pkg.marker,
                wheels=tuple(wheels),
            )
        )
    return LockInfo(
        path=path,
        requires_python=pylock.requires_python,
        environments=tuple(pylock.environments or ()),
        target=dict(tool.get("target", {})),
        packages=tuple(packages),
        toolkit=_read_toolkit(path, tool.get("cuda")),
        raw=data,
    )


def _read_toolkit(path: Path, table: Mapping[str, Any] | None) -> LockedToolkit | None:
    if not table:
        return None
    source = str(table.get("source", "runfile"))
    version = str(table.get("version", ""))
    if source != "runfile":
        return LockedToolkit(version=version, source=source)
    missing = [
        k for k in ("url", "sha256", "md5", "prefix", "install-args") if k not in table
    ]
    if missing:
        raise _lock_error(
            path,
            f"tool.stacklock.cuda: missing {', '.join(missing)}",
            "re-resolve the lock with a stacklock that records the runfile",
        )
    return LockedToolkit(
        version=version,
        source=source,
        runfile=str(table.get("runfile") or str(table["url"]).rsplit("/", 1)[-1]),
        url=str(table["url"]),
        size=int(table["size"]) if table.get("size") is not None else None,
        md5=str(table["md5"]).lower(),
        sha256=str(table["sha256"]).lower(),
        prefix=str(table["prefix"]),
        install_args=tuple(str(a) for a in table["install-args"]),
        min_driver=str(table["min-driver"]) if table.get("min-driver") else None,
    )


def applicable(lock: LockInfo, env: Mapping[str, str]) -> list[LockedPackage]:
    """The packages whose marker holds in ``env`` (what uv will install)."""
    return [
        p for p in lock.packages if p.marker is None or p.marker.evaluate(dict(env))
    ]


def best_wheel(pkg: LockedPackage, tags: Sequence[Tag]) -> LockedWheel | None:
    """The wheel uv picks: the one whose best tag comes first in ``tags``."""
    rank = {tag: i for i, tag in enumerate(tags)}
    scored = [
        (min(rank[t] for t in w.tags if t in rank), w.filename, w)
        for w in pkg.wheels
        if any(t in rank for t in w.tags)
    ]
    return min(scored)[2] if scored else None


def toolkit_args(toolkit: LockedToolkit, prefix: Path, tmpdir: Path) -> tuple[str, ...]:
    """The lock's install-args with the prefix pinned and never a driver flag.

    ``--tmpdir`` keeps the runfile's extraction out of a shared, maybe noexec /tmp.
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
    for required in ("--silent", "--toolkit"):
        if required not in args:
            args.append(required)
    args += [f"--toolkitpath={prefix}", f"--tmpdir={tmpdir}"]
    return tuple(args)


def make_plan(
    lock: LockInfo,
    *,
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
) -> InstallPlan:
    """The whole install as data. ``cached`` maps sha256 -> a file already here;
    ``replaced_generation`` is the number the current venv has (or gets, when a
    plain venv is adopted), which names its snapshot."""
    layout = VenvLayout(venv=venv)
    gen_dir = layout.generation_dir(generation)
    work = layout.work_dir(generation)
    uv_lock = work / "pylock.install.toml"
    packages = applicable(lock, interpreter.marker_env)
    downloads = []
    local: dict[str, str] = {}
    for pkg in packages:
        wheel = best_wheel(pkg, interpreter.tags)
        if wheel is None:
            continue  # preflight reports it
        hit = cached.get(wheel.sha256)
        if hit is not None:
            local[wheel.sha256] = str(hit)
        downloads.append(
            Download(
                kind="wheel",
                filename=wheel.filename,
                url=redact_url(wheel.url or wheel.path or ""),
                size=wheel.size,
                sha256=wheel.sha256,
                cached=hit is not None or wheel.url is None,  # a local path
            )
        )
    python_in_venv = str(gen_dir / "bin" / "python")
    commands: list[tuple[str, ...]] = [
        (uv, "venv", "--python", interpreter.path, str(gen_dir)),
        (
            uv, "pip", "sync", "--python", python_in_venv, "--require-hashes",
            "--no-build", "--preview-features", "pylock", str(uv_lock),
        ),
    ]  # fmt: skip
    toolkit = lock.toolkit if install_toolkit and lock.toolkit else None
    runfile_cmd = None
    prefix = None
    if toolkit is not None and toolkit.source == "runfile":
        prefix = toolkit_prefix or Path(str(toolkit.prefix))
        if not toolkit_present:
            assert toolkit.url is not None and toolkit.sha256 is not None
            downloads.append(
                Download(
                    kind="runfile",
                    filename=str(toolkit.runfile),
                    url=redact_url(toolkit.url),
                    size=toolkit.size,
                    sha256=toolkit.sha256,
                    cached=runfile_cached,
                )
            )
            runfile_cmd = (
                "sh",
                f"<store>/{toolkit.sha256}",
                *toolkit_args(toolkit, prefix, work / "runfile-tmp"),
            )
    return InstallPlan(
        lock_path=lock.path,
        venv=venv,
        generation=generation,
        generation_dir=gen_dir,
        replaces=replaces,
        replaced_generation=replaced_generation if replaces is not None else None,
        snapshot_path=layout.snapshot_path(replaced_generation)
        if replaces is not None and replaced_generation is not None
        else None,
        uv_lock_path=uv_lock,
        python=interpreter.path,
        packages=tuple((p.name, p.version) for p in packages),
        downloads=tuple(downloads),
        commands=tuple(commands),
        toolkit=toolkit,
        toolkit_prefix=prefix,
        runfile_command=runfile_cmd,
        activation_path=gen_dir / "stacklock-activate.sh",
        link_cuda=link_cuda if prefix is not None else None,
        local_wheels=local,
    )
