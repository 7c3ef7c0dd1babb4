"""``[tool.stacklock]`` as typed, frozen tables, read once when the lock is read.

A lock written by ``stacklock resolve`` carries a :class:`StackInfo` (the profile,
its requirements, the target, the indexes, the ``cuda`` entry, the ``validate``
table); a ``stacklock snapshot`` of an installed environment carries a
:class:`SnapshotInfo`; every package a :class:`PackageTool`. Each ``from_table``
reads strictly: a wrong type or an unknown key is a :class:`LockError` naming the
file and the key path (``locks/x.toml: tool.stacklock.cuda.size: ...``). Each
``to_dict`` gives the keys in the order the lock writes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.bounded import shown
from stacklock.errors import LockError, ProfileError
from stacklock.lock.toml import LockTable, TomlValue, put
from stacklock.patches.read import check_member_path
from stacklock.target import Target
from stacklock.variants import VariantChoice

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.requirements import Requirement


__all__ = [
    "LOCK_VERSION",
    "AppliedOverride",
    "CudaEntry",
    "CudaNote",
    "FoundToolkit",
    "LockedArchive",
    "LockedIndex",
    "PackageTool",
    "PatchRecord",
    "PatchedFile",
    "SnapshotInfo",
    "StackInfo",
]

LOCK_VERSION = 1  # the [tool.stacklock] lock-version this stacklock reads and writes

def _check_validate(table: Mapping[str, object], *, path: str | None, key: str
                    ) -> None:
    """``[tool.stacklock.validate]`` read as validate will read it, so a lock
    edited by hand is refused when it is loaded, not when validate runs. Imported
    here: only a lock with the table pays for the config module (and probes)."""
    from stacklock.validation import parse_validate_config

    try:
        parse_validate_config(table, path=path, prefix=key)
    except ProfileError as exc:
        raise LockError(exc.message, hint=exc.hint) from None


@dataclass(frozen=True, kw_only=True)
class AppliedOverride:
    """An override the resolution applied: ``package``'s requirement
    ``original`` was replaced by ``override``; ``package`` is None for the
    profile's own requirement."""

    package: str | None
    original: str
    override: str

    def to_dict(self) -> dict[str, str]:
        out = {"package": self.package or "profile"}
        out.update(original=self.original, override=self.override)
        return out


@dataclass(frozen=True, kw_only=True)
class LockedIndex:
    name: str
    url: str  # credentials stripped


@dataclass(frozen=True, kw_only=True)
class LockedArchive:
    """``[tool.stacklock.archive]``: where this lock's files are archived
    (``stacklock archive``), from the profile's ``[archive]``; install, pack and
    bisect read a file whose URL is gone from there (``first``: there first).
    A URL, never credentials: every file is still checked against its sha256."""

    url: str
    first: bool = False

    KEYS = ("url", "first")

    @classmethod
    def from_table(cls, t: LockTable) -> LockedArchive:
        from stacklock.lockarchive import archive_url_problem
        from stacklock.urls import redact_url

        url = t.str_("url")
        problem = archive_url_problem(url) if url else "missing url"
        if problem:
            raise t.reader.fail(f"{t.key}.url", f"{redact_url(url)!r}: {problem}",
                                hint="an absolute folder, file://, s3:// or https:// "
                                "URL; resolve the lock again")
        return cls(url=url, first=t.bool_("first"))

    def to_dict(self) -> dict[str, TomlValue]:
        out: dict[str, TomlValue] = {"url": self.url}
        if self.first:
            out["first"] = True
        return out


@dataclass(frozen=True, kw_only=True)
class CudaNote:
    """A coherence finding the lock records: a CUDA mix let through because the
    profile declares no toolkit ("warning"), a library carried beside its twin
    ("carried")."""

    package: str
    level: str
    cuda: str
    message: str

    KEYS = ("package", "level", "cuda", "message")

    def to_dict(self) -> dict[str, TomlValue]:
        return {"package": self.package, "level": self.level, "cuda": self.cuda,
                "message": self.message}


@dataclass(frozen=True, kw_only=True)
class CudaEntry:
    """``[tool.stacklock.cuda]``: the toolkit the stack needs. ``source`` "runfile"
    carries the runfile and how to run it, "pypi" the cuda-toolkit requirement."""

    version: str
    source: str
    platform: str | None = None
    requirements: tuple[str, ...] = ()
    runfile: str | None = None
    url: str | None = None
    size: int | None = None
    md5: str | None = None
    sha256: str | None = None
    bundled_driver: str | None = None
    min_driver: str | None = None
    compat_floor: str | None = None
    prefix: str | None = None
    install_args: tuple[str, ...] = ()
    allow_mixed: tuple[str, ...] = ()

    KEYS = ("version", "source", "platform", "requirements", "runfile", "url",
            "size", "md5", "sha256", "bundled-driver", "min-driver", "compat-floor",
            "prefix", "install-args", "allow-mixed")
    _RUNFILE_KEYS = ("url", "sha256", "md5", "prefix", "install-args")

    @classmethod
    def from_table(cls, t: LockTable) -> CudaEntry:
        source = t.str_("source", "runfile")
        missing = [k for k in cls._RUNFILE_KEYS if k not in t.data]
        if source == "runfile" and missing:
            raise LockError(f"{t.reader.path}: {t.key}: missing {', '.join(missing)}",
                            hint="re-resolve the lock with a stacklock that records "
                            "the runfile")
        url = t.opt_str("url")
        md5, sha256 = t.opt_str("md5"), t.opt_str("sha256")
        return cls(
            version=t.str_("version"), source=source, platform=t.opt_str("platform"),
            requirements=t.strs("requirements"),
            runfile=t.opt_str("runfile") or (url.rsplit("/", 1)[-1] if url else None),
            url=url, size=t.opt_int("size"),
            md5=md5.lower() if md5 else None,
            sha256=sha256.lower() if sha256 else None,
            bundled_driver=t.opt_str("bundled-driver"),
            min_driver=t.opt_str("min-driver"), compat_floor=t.opt_str("compat-floor"),
            prefix=t.opt_str("prefix"), install_args=t.strs("install-args"),
            allow_mixed=t.strs("allow-mixed"))

    def to_dict(self) -> dict[str, TomlValue]:
        out: dict[str, TomlValue] = {"version": self.version, "source": self.source}
        put(out, "platform", self.platform)
        if self.requirements:
            out["requirements"] = list(self.requirements)
        for key, value in (("runfile", self.runfile), ("url", self.url),
                           ("size", self.size), ("md5", self.md5),
                           ("sha256", self.sha256),
                           ("bundled-driver", self.bundled_driver),
                           ("min-driver", self.min_driver),
                           ("compat-floor", self.compat_floor),
                           ("prefix", self.prefix)):
            put(out, key, value)
        if self.install_args:
            out["install-args"] = list(self.install_args)
        if self.allow_mixed:
            out["allow-mixed"] = list(self.allow_mixed)
        return out


@dataclass(frozen=True, kw_only=True)
class StackInfo:
    """``[tool.stacklock]`` of a lock ``stacklock resolve`` wrote."""

    lock_version: int = LOCK_VERSION
    profile: str | None = None
    profile_sha256: str | None = None
    stacklock_version: str | None = None
    exclude_newer: str | None = None
    requirements: tuple[Requirement, ...] = ()
    overrides: tuple[Requirement, ...] = ()  # every override, as written
    # the overrides (constraints) whose marker is false on the target
    overrides_ignored: tuple[Requirement, ...] = ()
    overrides_applied: tuple[AppliedOverride, ...] = ()
    constraints: tuple[Requirement, ...] = ()
    constraints_ignored: tuple[Requirement, ...] = ()
    prereleases: tuple[str, ...] = ()
    target: Target | None = None
    gpu_variants: tuple[VariantChoice, ...] = ()  # which per-arch project, and why
    indexes: tuple[LockedIndex, ...] = ()
    allow_mixed: tuple[str, ...] = ()  # only when there is no cuda entry
    cuda_notes: tuple[CudaNote, ...] = ()  # coherence findings worth keeping
    check_allow: tuple[str, ...] = ()  # [check] allow: reviewed native findings
    # candidates the native check passed over: {package, version, reason}
    check_passed_over: tuple[Mapping[str, str], ...] = ()
    # modules no import of their package loads that would not load:
    # {package, version, module, reason}
    check_warnings: tuple[Mapping[str, str], ...] = ()
    check_strict: bool = False  # [check] strict: every finding blocked
    cuda: CudaEntry | None = None
    validate: Mapping[str, object] | None = None  # [validate], read by validate
    archive: LockedArchive | None = None  # the profile's [archive]

    KEYS = ("lock-version", "profile", "profile-sha256", "stacklock-version",
            "exclude-newer", "requirements", "overrides", "overrides-ignored",
            "overrides-applied", "constraints", "constraints-ignored",
            "prereleases", "target", "gpu-variants", "indexes", "allow-mixed",
            "cuda-notes", "check", "cuda", "validate", "archive")

    @classmethod
    def from_table(cls, t: LockTable) -> StackInfo:
        cuda = t.table("cuda", CudaEntry.KEYS)
        check = t.table("check", ("allow", "passed-over", "warnings", "strict"))
        archive = t.table("archive", LockedArchive.KEYS)
        validate = t.data.get("validate")
        if validate is not None and not isinstance(validate, dict):
            raise t.reader.fail(f"{t.key}.validate",
                                f"expected a table, got {validate!r}")
        if validate is not None:  # a typo must not switch a check or the gate off
            _check_validate(validate, path=t.reader.path, key=f"{t.key}.validate")
        return cls(
            lock_version=LOCK_VERSION, profile=t.opt_str("profile"),
            profile_sha256=t.opt_str("profile-sha256"),
            stacklock_version=t.opt_str("stacklock-version"),
            exclude_newer=t.opt_str("exclude-newer"),
            requirements=t.requirements("requirements"),
            overrides=t.requirements("overrides"),
            overrides_ignored=t.requirements("overrides-ignored"),
            overrides_applied=_overrides_applied(t),
            constraints=t.requirements("constraints"),
            constraints_ignored=t.requirements("constraints-ignored"),
            prereleases=t.strs("prereleases"),
            target=_target(t.table("target", _TARGET_KEYS)),
            gpu_variants=tuple(
                VariantChoice(project=canonicalize_name(v.str_("project")),
                              gpu_arch=v.strs("gpu-arch"),
                              chosen=canonicalize_name(v.str_("chosen")),
                              reason=v.str_("reason"))
                for v in t.tables("gpu-variants",
                                  ("project", "gpu-arch", "chosen", "reason"))),
            indexes=tuple(LockedIndex(name=i.str_("name"), url=i.str_("url"))
                          for i in t.tables("indexes", ("name", "url"))),
            allow_mixed=t.strs("allow-mixed"),
            cuda_notes=tuple(
                CudaNote(package=n.str_("package"), level=n.str_("level"),
                         cuda=n.str_("cuda"), message=n.str_("message"))
                for n in t.tables("cuda-notes", CudaNote.KEYS)),
            check_allow=check.strs("allow") if check is not None else (),
            check_passed_over=tuple(
                {k: p.str_(k) for k in _PASSED_OVER_KEYS}
                for p in check.tables("passed-over", _PASSED_OVER_KEYS))
            if check is not None else (),
            check_warnings=tuple(
                {k: w.str_(k) for k in _WARNING_KEYS}
                for w in check.tables("warnings", _WARNING_KEYS))
            if check is not None else (),
            check_strict=check.bool_("strict") if check is not None else False,
            cuda=CudaEntry.from_table(cuda) if cuda is not None else None,
            validate=validate if isinstance(validate, dict) else None,
            archive=LockedArchive.from_table(archive) if archive is not None
            else None)

    def to_dict(self) -> dict[str, TomlValue]:
        out: dict[str, TomlValue] = {"lock-version": self.lock_version}
        for key, value in (("profile", self.profile),
                           ("profile-sha256", self.profile_sha256),
                           ("stacklock-version", self.stacklock_version),
                           ("exclude-newer", self.exclude_newer)):
            put(out, key, value)
        out["requirements"] = [str(r) for r in self.requirements]
        out["overrides"] = [str(r) for r in self.overrides]
        if self.overrides_ignored:
            out["overrides-ignored"] = [str(r) for r in self.overrides_ignored]
        out["overrides-applied"] = [dict(a.to_dict()) for a in self.overrides_applied]
        out["constraints"] = [str(r) for r in self.constraints]
        if self.constraints_ignored:
            out["constraints-ignored"] = [str(r) for r in self.constraints_ignored]
        if self.prereleases:
            out["prereleases"] = list(self.prereleases)
        if self.target is not None:
            out["target"] = dict(self.target.to_dict())
        if self.gpu_variants:
            out["gpu-variants"] = [dict(v.to_dict()) for v in self.gpu_variants]
        out["indexes"] = [{"name": i.name, "url": i.url} for i in self.indexes]
        if self.allow_mixed:
            out["allow-mixed"] = list(self.allow_mixed)
        if self.cuda_notes:
            out["cuda-notes"] = [dict(n.to_dict()) for n in self.cuda_notes]
        check: dict[str, TomlValue] = {}
        if self.check_allow:
            check["allow"] = list(self.check_allow)
        if self.check_passed_over:
            check["passed-over"] = [dict(p) for p in self.check_passed_over]
        if self.check_warnings:
            check["warnings"] = [dict(w) for w in self.check_warnings]
        if self.check_strict:
            check["strict"] = True
        if check:
            out["check"] = check
        if self.cuda is not None:
            out["cuda"] = self.cuda.to_dict()
        if self.validate is not None:
            out["validate"] = _plain_table(self.validate)
        if self.archive is not None:
            out["archive"] = self.archive.to_dict()
        return out


_TARGET_KEYS = ("python", "platform", "manylinux", "gpu-arch")
_PASSED_OVER_KEYS = ("package", "version", "reason")
_WARNING_KEYS = ("package", "version", "module", "reason")


def _overrides_applied(t: LockTable) -> tuple[AppliedOverride, ...]:
    tables = t.tables("overrides-applied", ("package", "original", "override"))
    if not tables:
        return ()
    # the resolver's model: imported only for a lock that records overrides, so
    # that reading a lock (install, validate) does not load the resolver

    return tuple(
        AppliedOverride(
            package=None if (p := o.str_("package")) == "profile" else p,
            original=o.str_("original"), override=o.str_("override"))
        for o in tables)


def _target(t: LockTable | None) -> Target | None:
    if t is None:
        return None
    try:
        return Target(python=t.str_("python", "3.12"),
                      platform=t.str_("platform", "linux_x86_64"),
                      manylinux=t.str_("manylinux", "2_28"),
                      gpu_arch=t.strs("gpu-arch"))
    except ProfileError as exc:
        key = exc.key or "target"
        message = exc.message.removeprefix(f"{key}: ")
        where = t.key + key.removeprefix("target")
        raise LockError(f"{t.reader.path}: {where}: {message}", hint=exc.hint) from None


def _plain_table(table: Mapping[str, object]) -> dict[str, TomlValue]:
    """A table read by tomllib holds only TOML values; say so to the type checker."""
    out: dict[str, TomlValue] = {}
    for key, value in table.items():
        assert isinstance(value, str | int | float | bool | datetime | date | time
                          | list | dict)
        out[key] = value
    return out


@dataclass(frozen=True, kw_only=True)
class FoundToolkit:
    """A snapshot's ``toolkit``: the CUDA toolkit found beside the environment."""

    version: str
    prefix: str
    nvcc: str | None = None
    source: str | None = None  # "nvcc --version" when version.json was missing

    def to_dict(self) -> dict[str, TomlValue]:
        out: dict[str, TomlValue] = {"version": self.version}
        put(out, "nvcc", self.nvcc)
        out["prefix"] = self.prefix
        put(out, "source", self.source)
        return out


@dataclass(frozen=True, kw_only=True)
class SnapshotInfo:
    """``[tool.stacklock]`` of a snapshot: what was found in an environment."""

    venv: str
    stacklock_version: str | None = None
    toolkit: FoundToolkit | None = None
    driver: str | None = None
    unknown_origin: tuple[str, ...] = ()

    KEYS = ("snapshot", "venv", "stacklock-version", "toolkit", "driver",
            "unknown-origin", "lock-version")

    @classmethod
    def from_table(cls, t: LockTable) -> SnapshotInfo:
        kit = t.table("toolkit", ("version", "nvcc", "prefix", "source"))
        toolkit = None
        if kit is not None:
            toolkit = FoundToolkit(
                version=kit.str_("version"), prefix=kit.str_("prefix"),
                nvcc=kit.opt_str("nvcc"), source=kit.opt_str("source"))
        return cls(venv=t.str_("venv"),
                   stacklock_version=t.opt_str("stacklock-version"),
                   toolkit=toolkit, driver=t.opt_str("driver"),
                   unknown_origin=t.strs("unknown-origin"))

    def to_dict(self) -> dict[str, TomlValue]:
        out: dict[str, TomlValue] = {"snapshot": True, "venv": self.venv}
        put(out, "stacklock-version", self.stacklock_version)
        if self.toolkit is not None:
            out["toolkit"] = self.toolkit.to_dict()
        put(out, "driver", self.driver)
        out["unknown-origin"] = list(self.unknown_origin)
        return out


_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, kw_only=True)
class PatchedFile:
    """A file a patch changes, with the sha256 of its bytes once patched."""

    path: str
    sha256: str


@dataclass(frozen=True, kw_only=True)
class PatchRecord:
    """One ``[[packages.tool.stacklock.patches]]``: a patch of the profile's
    ``[[patches]]`` applied to this package's wheel. ``path`` is the patch
    file's, relative to the lock; ``sha256`` and ``size`` its bytes'; ``files``
    what it changes, each with its sha256 after this patch (the package and
    version are the entry's own)."""

    path: str
    sha256: str
    size: int
    reason: str
    files: tuple[PatchedFile, ...]

    KEYS = ("path", "sha256", "size", "reason", "files")

    @classmethod
    def from_table(cls, t: LockTable) -> PatchRecord:
        files = tuple(PatchedFile(path=f.str_("path"), sha256=_sha256(f, "sha256"))
                      for f in t.tables("files", ("path", "sha256")))
        if not files:
            raise t.reader.fail(f"{t.key}.files", "a patch changes at least one file")
        for i, f in enumerate(files):
            problem = check_member_path(f.path)
            if problem:
                raise t.reader.fail(f"{t.key}.files[{i}].path",
                                    f"{f.path!r}: {problem}")
        size = t.opt_int("size")
        if size is None or size <= 0:
            raise t.reader.fail(f"{t.key}.size", f"expected the patch's size, got "
                                f"{size!r}")
        path = t.str_("path")
        if not path:
            raise t.reader.fail(f"{t.key}.path", "missing: the patch file's path")
        return cls(path=path, sha256=_sha256(t, "sha256"), size=size,
                   reason=t.str_("reason"), files=files)

    def to_dict(self) -> dict[str, TomlValue]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size,
                "reason": self.reason,
                "files": [{"path": f.path, "sha256": f.sha256} for f in self.files]}


def _sha256(t: LockTable, key: str) -> str:
    value = t.str_(key)
    if not _SHA256.fullmatch(value):
        raise t.reader.fail(f"{t.key}.{key}", f"{shown(value)} is not a sha256 (64 "
                            "lower-case hex digits)")
    return value


@dataclass(frozen=True, kw_only=True)
class PackageTool:
    """``[packages.tool.stacklock]``: where a locked wheel came from (resolve), or
    what was found about an installed distribution (snapshot)."""

    index_name: str | None = None
    cuda: str | None = None  # the CUDA X.Y the wheel targets
    hash_source: str | None = None  # "index" | "download"
    record_sha256: str | None = None  # snapshot: sha256 of the installed RECORD
    installer: str | None = None  # snapshot: the INSTALLER file
    url: str | None = None  # snapshot: a URL install without hashes
    origin: str | None = None  # snapshot: "unknown"
    build: str | None = None  # resolve: why install builds this sdist
    yanked: str | None = None  # resolve: the yank reason of a file pinned with ==
    # resolve: how the sdist's metadata was had (PKG-INFO, pyproject.toml, or
    # a PEP 517 build on which interpreter, with which runtime pins)
    metadata: str | None = None
    # resolve: the projects whose locked versions this sdist's builds get
    # (the profile's match-runtime; install hands them to uv)
    match_runtime: tuple[str, ...] = ()
    # resolve: the profile's [[patches]] of this package, in the order applied
    patches: tuple[PatchRecord, ...] = ()

    _KEYS = (("index-name", "index_name"), ("cuda", "cuda"),
             ("hash-source", "hash_source"), ("record-sha256", "record_sha256"),
             ("installer", "installer"), ("url", "url"), ("origin", "origin"),
             ("build", "build"), ("yanked", "yanked"), ("metadata", "metadata"))
    KEYS = (*(key for key, _ in _KEYS), "match-runtime", "patches")

    @classmethod
    def from_table(cls, t: LockTable) -> PackageTool:
        cuda = t.opt_str("cuda")
        if cuda is not None:
            try:
                Version(cuda)
            except InvalidVersion:
                raise t.reader.fail(f"{t.key}.cuda",
                                    f"{cuda!r} is not a CUDA version") from None
        return cls(**{attr: t.opt_str(key) for key, attr in cls._KEYS},
                   match_runtime=t.strs("match-runtime"),
                   patches=tuple(PatchRecord.from_table(p) for p in
                                 t.tables("patches", PatchRecord.KEYS)))

    def to_dict(self) -> dict[str, TomlValue]:
        out: dict[str, TomlValue] = {}
        for key, attr in self._KEYS:
            value = getattr(self, attr)
            if value is not None:
                out[key] = value
        if self.match_runtime:
            out["match-runtime"] = list(self.match_runtime)
        if self.patches:
            out["patches"] = [p.to_dict() for p in self.patches]
        return out
