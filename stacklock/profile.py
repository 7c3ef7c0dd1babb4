"""Profiles: the one reviewed TOML file that declares a GPU stack.

``parse_profile`` is pure (a dict in, a :class:`Profile` out); ``load_profile`` reads
files, follows ``extends`` and names the file in every error. Unknown keys are errors:
a typo in a reviewed file must never be silently ignored.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidName, NormalizedName, canonicalize_name

from stacklock.errors import ProfileError
from stacklock.target import Target

__all__ = [
    "PYPI_URL",
    "CudaSpec",
    "IndexSpec",
    "Profile",
    "RequirementsSpec",
    "find_profile_path",
    "list_profiles",
    "load_profile",
    "parse_profile",
]

PYPI_URL = "https://pypi.org/simple"
BUILTIN_DIR = Path(__file__).resolve().parent.parent / "profiles"

_TOP_KEYS = {"profile", "target", "index", "requirements", "cuda", "validate"}
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
    },
    "cuda": {"toolkit", "source", "prefix", "components", "allow-mixed"},
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
class Profile:
    name: str
    description: str = ""
    target: Target = field(default_factory=Target)
    indexes: tuple[IndexSpec, ...] = ()
    requirements: RequirementsSpec = field(default_factory=RequirementsSpec)
    cuda: CudaSpec = field(default_factory=CudaSpec)
    validate: dict[str, Any] = field(
        default_factory=dict
    )  # parsed by stacklock.validate
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
                    path=self.path,
                    hint="one of " + ", ".join(sorted(known)),
                )
        indexes = tuple(
            replace(i, url=urls[i.name].rstrip("/")) if i.name in urls else i
            for i in self.indexes
        )
        return replace(self, indexes=indexes)


def _check_keys(data: Any, allowed: set[str], key: str, path: str | None) -> None:
    if not isinstance(data, dict):
        raise ProfileError(
            f"expected a table, got {type(data).__name__}", path=path, key=key
        )
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ProfileError(
            f"unknown key {unknown[0]!r}",
            path=path,
            key=f"{key}.{unknown[0]}" if key else unknown[0],
            hint="known keys: " + ", ".join(sorted(allowed)),
        )


def _str_list(value: Any, key: str, path: str | None) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProfileError(
            f"expected a list of strings, got {value!r}", path=path, key=key
        )
    return value


def _names(value: Any, key: str, path: str | None) -> tuple[NormalizedName, ...]:
    out: list[NormalizedName] = []
    for i, text in enumerate(_str_list(value, key, path)):
        try:
            out.append(canonicalize_name(text, validate=True))
        except InvalidName:
            raise ProfileError(
                f"{text!r} is not a project name", path=path, key=f"{key}[{i}]"
            ) from None
    return tuple(out)


def _requirements(value: Any, key: str, path: str | None) -> tuple[Requirement, ...]:
    out = []
    for i, text in enumerate(_str_list(value, key, path)):
        try:
            out.append(Requirement(text))
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0]
            raise ProfileError(
                f"{text!r} is not a PEP 508 requirement: {reason}",
                path=path,
                key=f"{key}[{i}]",
            ) from exc
    return tuple(out)


def _datetime(value: Any, key: str, path: str | None) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ProfileError(
                f"{value!r} is not an RFC 3339 date-time",
                path=path,
                key=key,
                hint='write it as "2026-02-15T00:00:00Z"',
            ) from exc
    else:
        raise ProfileError(f"expected a date-time, got {value!r}", path=path, key=key)
    if parsed.tzinfo is None:
        raise ProfileError(
            f"{value!r} has no time zone",
            path=path,
            key=key,
            hint="end it with Z for UTC",
        )
    return parsed


def _typed(value: Any, kind: type, key: str, path: str | None) -> Any:
    if not isinstance(value, kind):
        raise ProfileError(
            f"expected {kind.__name__}, got {value!r}", path=path, key=key
        )
    return value


def _parse_indexes(raw: Any, path: str | None) -> tuple[IndexSpec, ...]:
    if raw is None:
        return (IndexSpec(name="pypi", url=PYPI_URL),)
    if not isinstance(raw, list):
        raise ProfileError(
            "expected an array of tables [[index]]", path=path, key="index"
        )
    out: list[IndexSpec] = []
    seen_pkg: dict[str, str] = {}
    for i, entry in enumerate(raw):
        key = f"index[{i}]"
        _check_keys(entry, _KEYS["index"], key, path)
        name = _typed(entry.get("name"), str, f"{key}.name", path)
        url = entry.get("url")
        if url is None:
            if name != "pypi":
                raise ProfileError(
                    "missing url",
                    path=path,
                    key=f"{key}.url",
                    hint='only the index named "pypi" may omit url',
                )
            url = PYPI_URL
        url = _typed(url, str, f"{key}.url", path).rstrip("/")
        kind = _typed(entry.get("kind", "simple"), str, f"{key}.kind", path)
        if kind not in _INDEX_KINDS:
            raise ProfileError(
                f"kind {kind!r} is not one of {_INDEX_KINDS}",
                path=path,
                key=f"{key}.kind",
            )
        if any(o.name == name for o in out):
            raise ProfileError(
                f"index name {name!r} is used twice", path=path, key=f"{key}.name"
            )
        packages = []
        for j, pkg in enumerate(
            _str_list(entry.get("packages", []), f"{key}.packages", path)
        ):
            norm = canonicalize_name(pkg)
            if norm in seen_pkg:
                raise ProfileError(
                    f"{pkg!r} is already pinned to index {seen_pkg[norm]!r}",
                    path=path,
                    key=f"{key}.packages[{j}]",
                )
            seen_pkg[norm] = name
            packages.append(norm)
        out.append(IndexSpec(name=name, url=url, packages=tuple(packages), kind=kind))
    if not out:
        raise ProfileError(
            "at least one [[index]] is needed (or none, for PyPI)",
            path=path,
            key="index",
        )
    return tuple(out)


def parse_profile(
    data: dict[str, Any], *, name: str, path: str | None = None, sha256: str = ""
) -> Profile:
    """Build a Profile from an already merged TOML document. Pure."""
    _check_keys(data, _TOP_KEYS, "", path)
    meta = data.get("profile", {})
    _check_keys(meta, _KEYS["profile"], "profile", path)
    target_raw = data.get("target", {})
    _check_keys(target_raw, _KEYS["target"], "target", path)
    if "gpu-arch" in target_raw:
        _str_list(target_raw["gpu-arch"], "target.gpu-arch", path)
    try:
        target = Target.from_dict(target_raw)
    except ProfileError as exc:
        raise ProfileError(exc.message, path=path, key=exc.key, hint=exc.hint) from None

    req = data.get("requirements", {})
    _check_keys(req, _KEYS["requirements"], "requirements", path)
    requirements = RequirementsSpec(
        packages=_requirements(req.get("packages", []), "requirements.packages", path),
        overrides=_requirements(
            req.get("overrides", []), "requirements.overrides", path
        ),
        constraints=_requirements(
            req.get("constraints", []), "requirements.constraints", path
        ),
        prereleases=frozenset(
            canonicalize_name(n)
            for n in _str_list(
                req.get("prereleases", []), "requirements.prereleases", path
            )
        ),
        exclude_newer=(
            _datetime(req["exclude-newer"], "requirements.exclude-newer", path)
            if "exclude-newer" in req
            else None
        ),
    )
    if not requirements.packages:
        raise ProfileError(
            "no packages to resolve", path=path, key="requirements.packages"
        )

    cuda_raw = data.get("cuda", {})
    _check_keys(cuda_raw, _KEYS["cuda"], "cuda", path)
    source = _typed(
        cuda_raw.get("source", "runfile" if "toolkit" in cuda_raw else "none"),
        str,
        "cuda.source",
        path,
    )
    if source not in _CUDA_SOURCES:
        raise ProfileError(
            f"source {source!r} is not one of {_CUDA_SOURCES}",
            path=path,
            key="cuda.source",
        )
    toolkit = cuda_raw.get("toolkit")
    if toolkit is not None:
        toolkit = _typed(toolkit, str, "cuda.toolkit", path)
    if source != "none" and toolkit is None:
        raise ProfileError(
            f"source {source!r} needs a toolkit version",
            path=path,
            key="cuda.toolkit",
            hint='e.g. toolkit = "13.0.1"',
        )
    prefix = cuda_raw.get("prefix")
    if prefix is not None:
        prefix = _typed(prefix, str, "cuda.prefix", path)
    cuda = CudaSpec(
        toolkit=toolkit,
        source=source,
        prefix=prefix,
        components=tuple(
            _str_list(cuda_raw.get("components", []), "cuda.components", path)
        ),
        allow_mixed=_names(cuda_raw.get("allow-mixed", []), "cuda.allow-mixed", path),
    )
    validate = data.get("validate", {})
    _check_keys(
        validate,
        set(validate) if isinstance(validate, dict) else set(),
        "validate",
        path,
    )

    indexes = _parse_indexes(data.get("index"), path)
    return Profile(
        name=name,
        description=str(meta.get("description", "")),
        target=target,
        indexes=indexes,
        requirements=requirements,
        cuda=cuda,
        validate=dict(validate),
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
    """A path to an existing file, or a built-in profile's name."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        if not candidate.is_file():
            raise ProfileError(
                f"profile file {name_or_path} does not exist",
                hint="stacklock profiles lists the built-in ones",
            )
        return candidate
    folder = profiles_dir or BUILTIN_DIR
    path = folder / f"{name_or_path}.toml"
    if not path.is_file():
        known = ", ".join(list_profiles(folder)) or "none"
        raise ProfileError(
            f"no profile named {name_or_path!r} in {folder}",
            hint=f"one of: {known}, or a path to a .toml file",
        )
    return path


def list_profiles(folder: Path | None = None) -> list[str]:
    folder = folder or BUILTIN_DIR
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def _read_toml(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProfileError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    try:
        return tomllib.loads(raw.decode("utf-8")), raw
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"not valid TOML: {exc}", path=str(path)) from exc


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
    return parse_profile(
        merged, name=path.stem, path=str(path), sha256=digest.hexdigest()
    )
