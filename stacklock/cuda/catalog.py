"""The CUDA release catalog: which runfile, from where, with which hashes and drivers.

The catalog ships inside the package (``stacklock/data/cuda_releases.json``, built by
``scripts/build_cuda_catalog.py`` from recorded real sources), so a resolve never needs
NVIDIA's site. Every value keeps the name of the source it came from; a value no
source gives is ``None``, never filled in by guesswork.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

from stacklock.bounded import parse_json
from stacklock.errors import CudaError

__all__ = [
    "PLATFORMS",
    "Catalog",
    "CudaRelease",
    "Runfile",
    "load_catalog",
    "parse_catalog",
    "platform_for_target",
    "render_release",
    "render_releases",
]

PLATFORMS = ("linux-x86_64", "linux-sbsa")
_TARGET_PLATFORMS = {"linux_x86_64": "linux-x86_64", "linux_aarch64": "linux-sbsa"}
_RUNFILE_KEYS = ("runfile", "url", "bundled_driver", "size", "md5", "sha256")
_RELEASE_KEYS = ("release_date", "nvcc_version", "min_driver", "compat_floor",
                 "redistrib_sha256")
CATALOG_RESOURCE = "cuda_releases.json"
URL_BASE = "https://developer.download.nvidia.com/compute/cuda"


def platform_for_target(platform: str) -> str:
    """A target platform (``linux_x86_64``) as NVIDIA names it (``linux-x86_64``)."""
    if platform in PLATFORMS:
        return platform
    try:
        return _TARGET_PLATFORMS[platform]
    except KeyError:
        raise CudaError(
            f"no CUDA runfiles for platform {platform!r}",
            hint="one of " + ", ".join([*_TARGET_PLATFORMS, *PLATFORMS]),
        ) from None


@dataclass(frozen=True, kw_only=True)
class Runfile:
    """One local runfile installer; ``sources`` maps each field to its source."""

    platform: str
    runfile: str | None = None
    url: str | None = None
    bundled_driver: str | None = None
    size: int | None = None
    md5: str | None = None
    sha256: str | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"platform": self.platform}
        out.update({key: getattr(self, key) for key in _RUNFILE_KEYS})
        out["sources"] = dict(self.sources)
        return out


@dataclass(frozen=True, kw_only=True)
class CudaRelease:
    """One CUDA toolkit release and its runfiles per platform."""

    version: str
    release_date: str | None = None
    nvcc_version: str | None = None
    min_driver: str | None = None       # NVIDIA Table 3: full support from here on
    compat_floor: str | None = None     # Table 2: minor-version compatibility floor
    redistrib_sha256: str | None = None  # of NVIDIA's redistrib_<version>.json
    runfiles: dict[str, Runfile] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def parsed(self) -> Version:
        return Version(self.version)

    @property
    def major_minor(self) -> str:
        return f"{self.parsed.major}.{self.parsed.minor}"

    def runfile(self, platform: str = "linux-x86_64") -> Runfile | None:
        return self.runfiles.get(platform_for_target(platform))

    def to_dict(self, platform: str = "linux-x86_64") -> dict[str, Any]:
        """Release facts plus the runfile of ``platform`` flattened to the top."""
        name = platform_for_target(platform)
        chosen = self.runfiles.get(name) or Runfile(platform=name)
        out: dict[str, Any] = {"version": self.version}
        out.update({key: getattr(chosen, key) for key in _RUNFILE_KEYS})
        out["platform"] = chosen.platform
        out.update({key: getattr(self, key) for key in _RELEASE_KEYS})
        out["sources"] = {**self.sources, **chosen.sources}
        out["platforms"] = {
            name: rf.to_dict() for name, rf in sorted(self.runfiles.items())
        }
        return out


@dataclass(frozen=True, kw_only=True)
class Catalog:
    """Releases newest first; ``source_notes`` describes each source name."""

    releases: tuple[CudaRelease, ...]
    source_notes: dict[str, dict[str, str]] = field(default_factory=dict)
    origin: str = "embedded"

    def versions(self) -> list[str]:
        return [r.version for r in self.releases]

    def find(self, version: str) -> CudaRelease | None:
        """The release with exactly this X.Y.Z; "13.0" is not 13.0.0 here."""
        try:
            wanted = Version(version)
        except InvalidVersion:
            return None
        if len(wanted.release) < 3:
            return None
        return next((r for r in self.releases if r.parsed == wanted), None)

    def get(self, version: str, *, series: bool = False) -> CudaRelease:
        """The release ``version``; an unknown one lists the releases that exist.
        With ``series``, "13.1" means that series' GA release (13.1.0), the least
        demanding one; without, an X.Y is ambiguous and an error."""
        found = self.find(version)
        if found is not None:
            return found
        if series:
            found = next((r for r in reversed(self.releases)
                          if version in (r.major_minor, str(r.parsed.major))), None)
            if found is not None:
                return found
        same_series = [v for v in self.versions() if _series(v) == _series(version)]
        near = same_series or self.versions()[:8]
        if same_series and version.count(".") == 1:
            raise CudaError(f"CUDA toolkit {version!r} names a series, not a release",
                            hint="one of " + ", ".join(same_series))
        raise CudaError(
            f"CUDA toolkit {version!r} is not in the {self.origin} catalog "
            f"({len(self.releases)} releases, {self.releases[-1].version} to "
            f"{self.releases[0].version})",
            hint="one of " + ", ".join(near)
            + ("" if same_series else ", ... (stacklock cuda list shows all)"),
        )

    def with_release(self, release: CudaRelease) -> Catalog:
        others = [r for r in self.releases if r.version != release.version]
        ordered = sorted([*others, release], key=lambda r: r.parsed, reverse=True)
        return replace(self, releases=tuple(ordered))

    def to_dict(self) -> dict[str, Any]:
        """The on-disk schema (``{"value", "source"}`` pairs) the build writes."""
        def pair(obj: Any, key: str) -> dict[str, Any]:
            return {"value": getattr(obj, key), "source": obj.sources.get(key, "none")}

        return {
            "schema": 1,
            "generated-by": "scripts/build_cuda_catalog.py",
            "url-base": URL_BASE,
            "sources": self.source_notes,
            "releases": [
                {
                    "version": r.version,
                    **{key: pair(r, key) for key in _RELEASE_KEYS},
                    "platforms": {
                        name: {key: pair(rf, key) for key in _RUNFILE_KEYS}
                        for name, rf in sorted(r.runfiles.items())
                    },
                }
                for r in self.releases
            ],
        }


def _series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _unpair(raw: dict[str, Any], keys: tuple[str, ...], where: str
            ) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in keys:
        item = raw.get(key)
        if not isinstance(item, dict) or "value" not in item:
            raise CudaError(f"CUDA catalog: {where}.{key} is missing or not "
                            "a {value, source} pair",
                            hint="rebuild it with scripts/build_cuda_catalog.py")
        values[key] = item["value"]
        if item["value"] is not None:
            sources[key] = str(item.get("source", "unknown"))
    return values, sources


def parse_catalog(data: dict[str, Any], *, origin: str = "embedded") -> Catalog:
    """Build a Catalog from the JSON document. Pure."""
    if data.get("schema") != 1:
        raise CudaError(
            f"CUDA catalog ({origin}): unknown schema {data.get('schema')!r}",
            hint="this stacklock reads schema 1")
    releases = []
    for i, raw in enumerate(data.get("releases", [])):
        where = f"releases[{i}]"
        version = raw.get("version")
        try:
            Version(str(version))
        except InvalidVersion:
            raise CudaError(f"CUDA catalog: {where}.version {version!r} is not a "
                            "version") from None
        values, sources = _unpair(raw, _RELEASE_KEYS, where)
        runfiles = {}
        for name, entry in raw.get("platforms", {}).items():
            rf_values, rf_sources = _unpair(entry, _RUNFILE_KEYS,
                                            f"{where}.platforms.{name}")
            runfiles[name] = Runfile(platform=name, sources=rf_sources, **rf_values)
        releases.append(CudaRelease(version=str(version), runfiles=runfiles,
                                    sources=sources, **values))
    if not releases:
        raise CudaError(f"CUDA catalog ({origin}) has no releases")
    releases.sort(key=lambda r: r.parsed, reverse=True)
    return Catalog(releases=tuple(releases), source_notes=data.get("sources", {}),
                   origin=origin)


def load_catalog() -> Catalog:
    """The catalog shipped in the package (``importlib.resources``)."""
    resource = resources.files("stacklock").joinpath("data", CATALOG_RESOURCE)
    text = resource.read_text(encoding="utf-8")
    return parse_catalog(parse_json(text))


def render_releases(catalog: Catalog, platform: str = "linux-x86_64") -> str:
    """One line per release: version, runfile, min driver, what is known."""
    rows = [("version", "runfile", "min driver", "floor", "size", "md5", "sha256")]
    for r in catalog.releases:
        rf = r.runfile(platform) or Runfile(platform=platform)
        rows.append((
            r.version, rf.runfile or "-", r.min_driver or "-", r.compat_floor or "-",
            f"{rf.size / 2**30:.2f} GiB" if rf.size else "-",
            "yes" if rf.md5 else "-", "yes" if rf.sha256 else "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def render_release(release: CudaRelease, platform: str = "linux-x86_64") -> str:
    data = release.to_dict(platform)
    lines = [f"CUDA {release.version} ({data['platform']})"]
    for key in ("runfile", "url", "size", "md5", "sha256", "bundled_driver",
                "min_driver", "compat_floor", "release_date", "nvcc_version"):
        value = data[key]
        source = data["sources"].get(key)
        shown = "unknown" if value is None else str(value)
        lines.append(f"  {key:<15} {shown}" + (f"  [{source}]" if source else ""))
    return "\n".join(lines)
