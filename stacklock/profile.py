"""Profiles: the one reviewed TOML file that declares a GPU stack.

``parse_profile`` is pure (a dict in, a :class:`Profile` out); ``load_profile`` reads
files, follows ``extends`` and names the file in every error. Unknown keys are errors:
a typo in a reviewed file must never be silently ignored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidName, NormalizedName, canonicalize_name

from stacklock.bounded import Malformed, parse_toml, read_regular, shown
from stacklock.errors import ProfileError
from stacklock.tablereader import TableReader
from stacklock.target import Target
from stacklock.urls import redact_url
from stacklock.variants import GpuVariants, parse_gpu_variants

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime

    from packaging.requirements import Requirement

    from stacklock.patches import Patch

__all__ = [
    "PYPI_URL",
    "CheckSpec",
    "CudaSpec",
    "FoundProfile",
    "IndexSpec",
    "PatchSpec",
    "Profile",
    "RequirementsSpec",
    "default_lock_path",
    "find_profile_path",
    "find_profiles",
    "list_profiles",
    "load_profile",
    "parse_profile",
]

PYPI_URL = "https://pypi.org/simple"
MAX_PROFILE_BYTES = 1 << 20  # the built-in ones are 1-3 kB
def _builtin_dir() -> Path:
    """The built-in profiles: inside the installed package (the wheel carries the
    checkout's ``profiles/`` as ``stacklock/profiles/``), else the checkout's own
    folder (an editable install, or a run from the source tree)."""
    packaged = Path(__file__).resolve().parent / "profiles"
    return packaged if packaged.is_dir() else packaged.parent.parent / "profiles"


BUILTIN_DIR = _builtin_dir()
LOCAL_DIR = Path("profiles")  # the working directory's, which wins over a built-in

_TOP_KEYS = {
    "profile", "target", "index", "requirements", "cuda", "check", "validate",
    "gpu-variants", "patches", "archive",
}
_KEYS = {
    "profile": {"description", "extends", "notes"},
    "target": {"python", "platform", "manylinux", "gpu-arch"},
    "index": {"name", "url", "packages", "kind"},
    "requirements": {
        "packages",
        "overrides",
        "constraints",
        "prereleases",
        "exclude-newer",
        "no-build",
        "build-requires",
        "match-runtime",
    },
    "cuda": {"toolkit", "source", "prefix", "components", "allow-mixed"},
    "check": {"allow", "strict"},
    "archive": {"url", "first"},
    "patches": {"package", "versions", "file", "reason"},
}
_CUDA_SOURCES = ("runfile", "pypi", "none")
_INDEX_KINDS = ("simple", "flat")


@dataclass(frozen=True, kw_only=True)
class IndexSpec:
    """One ``[[index]]``: ``packages`` listed here come only from this index."""

    name: str
    url: str
    packages: tuple[NormalizedName, ...] = ()
    kind: str = "simple"  # "simple" (PEP 503/691) or "flat" (find-links page/folder)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "url": self.url}
        if self.packages:
            out["packages"] = list(self.packages)
        if self.kind != "simple":
            out["kind"] = self.kind
        return out


@dataclass(frozen=True, kw_only=True)
class RequirementsSpec:
    packages: tuple[Requirement, ...] = ()
    overrides: tuple[Requirement, ...] = ()
    constraints: tuple[Requirement, ...] = ()
    prereleases: frozenset[NormalizedName] = frozenset()
    exclude_newer: datetime | None = None
    # ``no-build``: true refuses every sdist, a list of names refuses theirs
    no_build_all: bool = False
    no_build: frozenset[NormalizedName] = frozenset()
    # ``build-requires``: project -> what its build needs besides its own
    # build-system requirements (installed into its build environment)
    build_requires: Mapping[NormalizedName, tuple[Requirement, ...]] = field(
        default_factory=dict)
    # ``match-runtime``: project -> projects of the lock whose locked versions
    # its build environment gets (flash-attn builds against the locked torch)
    match_runtime: Mapping[NormalizedName, tuple[NormalizedName, ...]] = field(
        default_factory=dict)

    def refuses_build(self, name: str) -> bool:
        """Whether the profile forbids building ``name`` from an sdist."""
        return self.no_build_all or canonicalize_name(name) in self.no_build


@dataclass(frozen=True, kw_only=True)
class CudaSpec:
    """``[cuda]``: which toolkit the stack needs and how it is installed."""

    toolkit: str | None = None
    source: str = "none"
    prefix: str | None = None
    components: tuple[str, ...] = ()
    # CUDA libraries of another major that a reviewer let into the stack
    allow_mixed: tuple[NormalizedName, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CheckSpec:
    """``[check]``: packages whose native findings a reviewer accepted
    (:mod:`stacklock.native`); ``strict``: a finding in a module no import of
    its package loads blocks too, instead of being a warning. Recorded in
    the lock."""

    allow: tuple[NormalizedName, ...] = ()
    strict: bool = False


@dataclass(frozen=True, kw_only=True)
class ArchiveSpec:
    """``[archive]``: where ``stacklock archive`` keeps this stack's files;
    recorded in the lock, so that install, pack and bisect of the lock read a
    file whose URL is gone from there (``first``: there first)."""

    url: str
    first: bool = False


@dataclass(frozen=True, kw_only=True)
class PatchSpec:
    """One ``[[patches]]``: a unified diff of ``package``'s files, for the
    versions ``versions`` allows (any when None), and why. ``file`` is as
    written (relative to the profile, or absolute), ``path`` where it is;
    ``patch`` is read by :func:`load_profile` (None from :func:`parse_profile`,
    which reads no file)."""

    package: NormalizedName
    versions: SpecifierSet | None
    file: str
    path: Path
    reason: str
    patch: Patch | None = None


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    description: str = ""
    target: Target = field(default_factory=Target)
    indexes: tuple[IndexSpec, ...] = ()
    requirements: RequirementsSpec = field(default_factory=RequirementsSpec)
    cuda: CudaSpec = field(default_factory=CudaSpec)
    gpu_variants: tuple[GpuVariants, ...] = ()  # see stacklock.variants
    check: CheckSpec = field(default_factory=CheckSpec)
    # [validate]: checked when the profile loads; the lock carries it for validate
    validate: dict[str, Any] = field(default_factory=dict)
    patches: tuple[PatchSpec, ...] = ()  # [[patches]], in the order applied
    archive: ArchiveSpec | None = None
    path: str | None = None
    sha256: str = ""  # of the file bytes, the files it extends included

    def index_named(self, name: str) -> IndexSpec | None:
        return next((i for i in self.indexes if i.name == name), None)

    def with_index_urls(self, urls: dict[str, str]) -> Profile:
        """``--index NAME=URL``: point a named index at a mirror."""
        known = {i.name for i in self.indexes}
        for name in urls:
            if name not in known:
                raise ProfileError(
                    f"--index {name}=...: no index named {name!r} in the profile",
                    path=self.path, hint="one of " + ", ".join(sorted(known)))
        for name, url in urls.items():
            problem = _url_problem(url)
            if problem:
                raise ProfileError(f"--index {name}={redact_url(url)}: {problem}",
                                   path=self.path,
                                   hint="e.g. --index pypi=https://host:8443/simple")
        indexes = tuple(replace(i, url=urls[i.name].rstrip("/")) if i.name in urls
                        else i for i in self.indexes)
        return replace(self, indexes=indexes)


def _url_problem(url: str) -> str | None:
    """What is wrong with an http(s) index URL (a bad port, no host), None when
    nothing is; a folder or another scheme is judged where it is read."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return None
    if not parts.hostname:
        return "no host name"
    try:
        parts.port  # noqa: B018 (parsed on access)
    except ValueError as exc:
        return f"bad port ({exc})"
    return None


def _parse_indexes(raw: Any, r: TableReader) -> tuple[IndexSpec, ...]:
    if raw is None:
        return (IndexSpec(name="pypi", url=PYPI_URL),)
    if not isinstance(raw, list):
        raise r.fail("index", "expected an array of tables [[index]]")
    out: list[IndexSpec] = []
    seen_pkg: dict[str, str] = {}
    for i, entry in enumerate(raw):
        key = f"index[{i}]"
        r.table(entry, key, _KEYS["index"])
        name = r.string(entry.get("name"), f"{key}.name")
        url = entry.get("url")
        if url is None:
            if name != "pypi":
                raise r.fail(f"{key}.url", "missing url",
                             hint='only the index named "pypi" may omit url')
            url = PYPI_URL
        url = r.string(url, f"{key}.url").rstrip("/")
        problem = _url_problem(url)
        if problem:
            raise r.fail(f"{key}.url", f"{redact_url(url)}: {problem}",
                         hint="an https:// or http:// URL, a file:// URL or a folder")
        kind = r.string(entry.get("kind", "simple"), f"{key}.kind")
        if kind not in _INDEX_KINDS:
            raise r.fail(f"{key}.kind", f"kind {kind!r} is not one of {_INDEX_KINDS}")
        if any(o.name == name for o in out):
            raise r.fail(f"{key}.name", f"index name {name!r} is used twice")
        packages = []
        for j, pkg in enumerate(r.strings(entry.get("packages", []),
                                          f"{key}.packages")):
            try:  # "torch_" would pin "torch-", and torch would not be pinned
                norm = canonicalize_name(pkg, validate=True)
            except InvalidName:
                raise r.fail(f"{key}.packages[{j}]", f"{shown(pkg)} is not a "
                             "project name, so it pins nothing",
                             hint="letters, digits and . _ - between them, as the "
                             "project is spelled in requirements") from None
            if norm in seen_pkg:
                raise r.fail(f"{key}.packages[{j}]",
                             f"{pkg!r} is already pinned to index {seen_pkg[norm]!r}")
            seen_pkg[norm] = name
            packages.append(norm)
        out.append(IndexSpec(name=name, url=url, packages=tuple(packages), kind=kind))
    if not out:
        raise r.fail("index", "at least one [[index]] is needed (or none, for PyPI)")
    return tuple(out)


def _parse_target(raw: Any, r: TableReader) -> Target:
    table = r.table(raw, "target", _KEYS["target"])
    for key in ("python", "platform", "manylinux"):
        if key in table:
            r.string(table[key], f"target.{key}")
    if "gpu-arch" in table:
        r.strings(table["gpu-arch"], "target.gpu-arch")
    try:
        return Target.from_dict(table)
    except ProfileError as exc:
        raise ProfileError(exc.detail, path=r.path, key=exc.key,
                           hint=exc.hint) from None


def _parse_requirements(raw: Any, r: TableReader) -> RequirementsSpec:
    req = r.table(raw, "requirements", _KEYS["requirements"])
    requirements = RequirementsSpec(
        packages=r.requirements(req.get("packages", []), "requirements.packages"),
        overrides=r.requirements(req.get("overrides", []), "requirements.overrides"),
        constraints=r.requirements(req.get("constraints", []),
                                   "requirements.constraints"),
        prereleases=frozenset(
            canonicalize_name(n)
            for n in r.strings(req.get("prereleases", []), "requirements.prereleases")
        ),
        # false: no cut-off, said on purpose (a nightly profile over one with)
        exclude_newer=(
            r.date_time(req["exclude-newer"], "requirements.exclude-newer")
            if req.get("exclude-newer", False) is not False else None
        ),
    )
    if not requirements.packages:
        raise r.fail("requirements.packages", "no packages to resolve")
    return replace(requirements, **_parse_build_keys(req, r))


def _parse_build_keys(req: dict[str, Any], r: TableReader) -> dict[str, Any]:
    """``no-build`` (true, false or a list of names), ``build-requires`` (a
    table of name = [requirements]) and ``match-runtime`` (name = [names])."""
    out: dict[str, Any] = {}
    value = req.get("no-build", False)
    if isinstance(value, bool):
        out["no_build_all"] = value
    elif isinstance(value, list):
        out["no_build"] = frozenset(r.names(value, "requirements.no-build"))
    else:
        raise r.fail("requirements.no-build",
                     f"expected true, false or a list of names, got {value!r}")
    out["build_requires"] = _per_project(
        req, r, "build-requires", "requirements", r.requirements,
        '{"flash-attn" = ["torch==2.9.1"]}')
    out["match_runtime"] = _per_project(
        req, r, "match-runtime", "names", r.names, '{"flash-attn" = ["torch"]}')
    return out


def _per_project(req: dict[str, Any], r: TableReader, key: str, what: str,
                 read: Callable[[Any, str], tuple[Any, ...]],
                 example: str) -> dict[NormalizedName, tuple[Any, ...]]:
    """A ``[requirements]`` table of project name = [``what``]."""
    table = req.get(key, {})
    where = f"requirements.{key}"
    if not isinstance(table, dict):
        raise r.fail(where, f"expected a table of name = [{what}], got {table!r}",
                     hint=f"write {key} = {example}")
    return {r.names([name], where)[0]: tuple(read(value, f"{where}.{name}"))
            for name, value in table.items()}


def _parse_patches(raw: Any, r: TableReader, base: Path) -> tuple[PatchSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise r.fail("patches", "expected an array of tables [[patches]]")
    out = []
    for i, entry in enumerate(raw):
        key = f"patches[{i}]"
        r.table(entry, key, _KEYS["patches"])
        for needed in ("package", "file", "reason"):
            if needed not in entry:
                raise r.fail(f"{key}.{needed}", "missing", hint="a patch names its "
                             "package, its file and the reason for it")
        package = r.names([r.string(entry["package"], f"{key}.package")],
                          f"{key}.package")[0]
        file = r.string(entry["file"], f"{key}.file")
        reason = r.string(entry["reason"], f"{key}.reason").strip()
        if not reason or not file:
            raise r.fail(f"{key}.{'reason' if file else 'file'}", "empty",
                         hint="say why the package is patched (shown by diff "
                         "and validate)")
        versions = None
        if "versions" in entry:
            text = r.string(entry["versions"], f"{key}.versions")
            try:
                versions = SpecifierSet(text)
            except InvalidSpecifier:
                raise r.fail(f"{key}.versions", f"{text!r} is not a version "
                             "specifier", hint='e.g. versions = "==0.5.9"') from None
        out.append(PatchSpec(package=package, versions=versions, file=file,
                             path=base / file, reason=reason))
    return tuple(out)


def _parse_cuda(raw: Any, r: TableReader) -> CudaSpec:
    cuda = r.table(raw, "cuda", _KEYS["cuda"])
    source = r.string(cuda.get("source", "runfile" if "toolkit" in cuda else "none"),
                      "cuda.source")
    if source not in _CUDA_SOURCES:
        raise r.fail("cuda.source", f"source {source!r} is not one of {_CUDA_SOURCES}")
    toolkit = cuda.get("toolkit")
    if toolkit is not None:
        toolkit = r.string(toolkit, "cuda.toolkit")
    if source != "none" and toolkit is None:
        raise r.fail("cuda.toolkit", f"source {source!r} needs a toolkit version",
                     hint='e.g. toolkit = "13.0.1"')
    prefix = cuda.get("prefix")
    return CudaSpec(
        toolkit=toolkit,
        source=source,
        prefix=r.string(prefix, "cuda.prefix") if prefix is not None else None,
        components=r.strings(cuda.get("components", []), "cuda.components"),
        allow_mixed=r.names(cuda.get("allow-mixed", []), "cuda.allow-mixed"),
    )


def _parse_archive(raw: Any, r: TableReader) -> ArchiveSpec | None:
    if raw is None:
        return None
    from stacklock.lockarchive import archive_url_problem

    table = r.table(raw, "archive", _KEYS["archive"])
    if "url" not in table:
        raise r.fail("archive.url", "missing url",
                     hint='url = "s3://team-wheels/stacklock"')
    url = r.string(table["url"], "archive.url").rstrip("/")
    problem = archive_url_problem(url)
    if problem:
        raise r.fail("archive.url", f"{redact_url(url)}: {problem}",
                     hint="an absolute folder, file://, s3://BUCKET/PREFIX or "
                          "https:// URL")
    return ArchiveSpec(url=url, first=r.boolean(table.get("first", False),
                                                 "archive.first"))


def parse_profile(
    data: dict[str, Any], *, name: str, path: str | None = None, sha256: str = ""
) -> Profile:
    """Build a Profile from an already merged TOML document. Pure."""
    r = TableReader(path)
    r.table(data, "", _TOP_KEYS)
    meta = r.table(data.get("profile", {}), "profile", _KEYS["profile"])
    target = _parse_target(data.get("target", {}), r)
    requirements = _parse_requirements(data.get("requirements", {}), r)
    cuda = _parse_cuda(data.get("cuda", {}), r)
    check = r.table(data.get("check", {}), "check", _KEYS["check"])
    validate = data.get("validate", {})
    if validate != {}:  # checked now; an empty table is always valid
        from stacklock.validation import parse_validate_config

        parse_validate_config(validate, path=path, prefix="validate")
    return Profile(
        name=name,
        description=str(meta.get("description", "")),
        target=target,
        indexes=_parse_indexes(data.get("index"), r),
        requirements=requirements,
        cuda=cuda,
        gpu_variants=parse_gpu_variants(data.get("gpu-variants"), path),
        check=CheckSpec(allow=r.names(check.get("allow", []), "check.allow"),
                        strict=r.boolean(check.get("strict", False), "check.strict")),
        validate=dict(validate),
        patches=_parse_patches(data.get("patches"), r,
                               Path(path).parent if path else Path()),
        archive=_parse_archive(data.get("archive"), r),
        path=path,
        sha256=sha256,
    )


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Key by key: tables merge recursively; arrays and scalars of the child win."""
    out = dict(base)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def find_profile_path(name_or_path: str, profiles_dir: Path | None = None) -> Path:
    """A path to an existing file, or a profile's name: ``profiles/NAME.toml`` of
    the working directory when there is one, else the built-in one (or only
    ``profiles_dir``'s, when given)."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        if not candidate.is_file():
            what = "is not a regular file" if candidate.exists() else "does not exist"
            raise ProfileError(
                f"profile file {name_or_path} {what}",
                hint="stacklock profiles lists the ones found by name",
            )
        return candidate
    folders = [profiles_dir] if profiles_dir is not None else [LOCAL_DIR, BUILTIN_DIR]
    for folder in folders:
        path = folder / f"{name_or_path}.toml"
        if path.is_file():
            return path
    known = ", ".join(sorted({p.name for p in find_profiles(folders)})) or "none"
    where = " or ".join(str(f) for f in folders)
    raise ProfileError(
        f"no profile named {name_or_path!r} in {where}",
        hint=f"one of: {known}, or a path to a .toml file",
    )


def default_lock_path(profile: str) -> Path:
    """Where the lock of ``profile`` goes unless told otherwise."""
    return Path("locks") / f"pylock.{profile}.toml"


@dataclass(frozen=True, kw_only=True)
class FoundProfile:
    """A profile found by name: where it is and whether it is a built-in one or
    the working directory's (which then hides the built-in one of its name)."""

    name: str
    path: Path
    origin: str  # "local" or "built-in"


def find_profiles(folders: Sequence[Path] | None = None) -> list[FoundProfile]:
    """Every profile a name finds, sorted by name; the first folder that has a
    name wins (default: the working directory's ``profiles/``, then the
    built-in ones)."""
    if folders is None:
        folders = [LOCAL_DIR, BUILTIN_DIR]
    found: dict[str, FoundProfile] = {}
    builtin = BUILTIN_DIR.resolve()
    for folder in folders:
        if not folder.is_dir():
            continue
        origin = "built-in" if folder.resolve() == builtin else "local"
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, FoundProfile(name=path.stem, path=path,
                                                     origin=origin))
    return [found[name] for name in sorted(found)]


def list_profiles(folder: Path | None = None) -> list[str]:
    """The names :func:`find_profile_path` finds (only ``folder``'s, if given)."""
    return [p.name for p in find_profiles(None if folder is None else [folder])]


def _read_toml(path: Path) -> tuple[dict[str, Any], bytes]:
    """The profile file's tables and bytes (the one reader of profile files)."""
    try:
        raw = read_regular(path, limit=MAX_PROFILE_BYTES)
        return parse_toml(raw), raw
    except Malformed as exc:
        raise ProfileError(str(exc), path=str(path),
                           hint="a profile is a TOML file such as profiles/"
                           "pypi-small.toml") from None
    except OSError as exc:
        raise ProfileError(f"cannot read: {exc.strerror or exc}",
                           path=str(path)) from None


def load_profile(name_or_path: str, profiles_dir: Path | None = None) -> Profile:
    """Read a profile file, follow ``extends`` (same folder), merge, parse."""
    path = find_profile_path(name_or_path, profiles_dir)
    chain: list[Path] = []
    docs: list[dict[str, Any]] = []
    digest = hashlib.sha256()
    current: Path | None = path
    while current is not None:
        resolved = current.resolve()
        if resolved in chain:
            cycle = " -> ".join(p.stem for p in [*chain, resolved])
            raise ProfileError(
                f"extends cycle: {cycle}", path=str(path), key="profile.extends"
            )
        chain.append(resolved)
        doc, raw = _read_toml(current)
        digest.update(raw)
        docs.append(doc)
        parent = (
            doc.get("profile", {}).get("extends")
            if isinstance(doc.get("profile"), dict)
            else None
        )
        if parent is None:
            current = None
        else:
            if not isinstance(parent, str):
                raise ProfileError(
                    "expected a profile name", path=str(current), key="profile.extends"
                )
            current = current.parent / f"{parent}.toml"
            if not current.is_file():
                raise ProfileError(
                    f"extends {parent!r}, but {current} does not exist",
                    path=str(chain[-1]),
                    key="profile.extends",
                )
    merged: dict[str, Any] = {}
    for doc in reversed(docs):
        merged = _merge(merged, doc)
    merged.get("profile", {}).pop("extends", None)
    profile = parse_profile(
        merged, name=path.stem, path=str(path), sha256=digest.hexdigest()
    )
    if not profile.patches:
        return profile
    from stacklock.patches import load_patch

    return replace(profile, patches=tuple(
        replace(spec, patch=load_patch(spec.path, where=spec.file))
        for spec in profile.patches))
