"""Pure parsers of NVIDIA's pages: bytes in, facts out. Nothing here fetches.

Formats (see stacklock/data/PROVENANCE.md for which ones have a real recording):

* ``redistrib_<version>.json`` - the release's component manifest (recorded real).
* ``<version>/docs/sidebar/md5sum.txt`` - ``md5sum`` output, one ``<md5>  <file>``
  line per installer (no recording found; parsed as the coreutils format).
* ``<version>/local_installers/`` - a directory listing: anchors to the installers
  (no recording found; any HTML whose ``<a href>`` name the runfiles).
* ``developer.nvidia.com/cuda-toolkit-archive`` - links to
  ``cuda-13-0-1-download-archive`` pages, one per release (no recording found).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup
from packaging.version import InvalidVersion, Version

from stacklock.bounded import Malformed, parse_json
from stacklock.errors import CudaError

__all__ = [
    "ARCHIVE_URL",
    "URL_BASE",
    "Md5Sums",
    "RedistribManifest",
    "listing_url",
    "md5sum_url",
    "parse_archive_page",
    "parse_local_installers",
    "parse_md5sum_txt",
    "parse_redistrib_manifest",
    "parse_runfile_name",
    "redistrib_url",
    "runfile_url",
]

URL_BASE = "https://developer.download.nvidia.com/compute/cuda"
ARCHIVE_URL = "https://developer.nvidia.com/cuda-toolkit-archive"
_MD5_LINE_RE = re.compile(r"^([0-9a-fA-F]{32})\s+\*?(\S.*?)\s*$")
_RUNFILE_RE = re.compile(
    r"^cuda_(?P<version>\d+\.\d+\.\d+)(?:_(?P<driver>\d+\.\d+(?:\.\d+)?))?_linux"
    r"(?P<sbsa>_sbsa)?\.run$"
)
_ARCHIVE_HREF_RE = re.compile(r"cuda-(\d+)-(\d+)-(\d+)-download-archive")
_ARCHIVE_TEXT_RE = re.compile(r"CUDA Toolkit (\d+\.\d+\.\d+)")


def md5sum_url(version: str) -> str:
    return f"{URL_BASE}/{version}/docs/sidebar/md5sum.txt"


def listing_url(version: str) -> str:
    return f"{URL_BASE}/{version}/local_installers/"


def redistrib_url(version: str) -> str:
    return f"{URL_BASE}/redist/redistrib_{version}.json"


def runfile_url(version: str, runfile: str) -> str:
    return f"{URL_BASE}/{version}/local_installers/{runfile}"


def parse_runfile_name(name: str) -> tuple[str, str, str | None] | None:
    """``cuda_13.0.1_580.82.07_linux_sbsa.run`` -> (13.0.1, linux-sbsa, 580.82.07);
    None for anything that is not a Linux runfile (debs, Windows, ppc64le)."""
    m = _RUNFILE_RE.match(name)
    if m is None:
        return None
    return m["version"], "linux-sbsa" if m["sbsa"] else "linux-x86_64", m["driver"]


@dataclass(frozen=True, kw_only=True)
class Md5Sums:
    sums: dict[str, str]                       # file name -> md5 (lower case)
    skipped: tuple[str, ...] = field(default=())  # lines that were not "<md5> <file>"


def parse_md5sum_txt(content: bytes, *, url: str = "md5sum.txt") -> Md5Sums:
    """``<md5>  <file>`` lines (``*`` binary marker and paths allowed)."""
    text = content.decode("utf-8", errors="replace")
    sums: dict[str, str] = {}
    skipped = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _MD5_LINE_RE.match(line.strip())
        if m is None:
            skipped.append(line.strip())
            continue
        name = m.group(2).rsplit("/", 1)[-1]
        md5 = m.group(1).lower()
        if sums.get(name, md5) != md5:
            raise CudaError(f"{url}: {name} is listed twice with different md5")
        sums[name] = md5
    if not sums:
        raise CudaError(f"{url}: no '<md5>  <file>' lines; not an md5sum.txt",
                        hint="NVIDIA may have moved the file; the embedded catalog "
                             "is used")
    return Md5Sums(sums=sums, skipped=tuple(skipped))


def _anchors(content: bytes) -> list[tuple[str, str]]:
    soup = BeautifulSoup(content, "html.parser")
    out = []
    for a in soup.find_all("a", href=True):
        href = str(a["href"])
        out.append((href, a.get_text(" ", strip=True)))
    return out


def parse_local_installers(content: bytes) -> list[str]:
    """The Linux runfile names a ``local_installers/`` listing links to, sorted."""
    names = set()
    for href, _text in _anchors(content):
        name = unquote(urlsplit(href).path.rsplit("/", 1)[-1])
        if parse_runfile_name(name) is not None:
            names.add(name)
    return sorted(names)


def parse_archive_page(content: bytes) -> list[str]:
    """Every release the toolkit archive page links to, newest first."""
    found = set()
    for href, text in _anchors(content):
        m = _ARCHIVE_HREF_RE.search(href)
        if m:
            found.add(".".join(m.groups()))
            continue
        t = _ARCHIVE_TEXT_RE.search(text)
        if t:
            found.add(t.group(1))
    try:
        return sorted(found, key=Version, reverse=True)
    except InvalidVersion:  # pragma: no cover - the regexes only match digits
        return sorted(found, reverse=True)


@dataclass(frozen=True, kw_only=True)
class RedistribManifest:
    release_label: str
    release_date: str | None
    sha256: str                        # of the manifest bytes
    components: dict[str, str]         # cuda_nvcc -> 13.0.88
    platforms: dict[str, tuple[str, ...]]  # component -> platforms it ships for

    @property
    def nvcc_version(self) -> str | None:
        return self.components.get("cuda_nvcc")

    @property
    def driver_version(self) -> str | None:
        return self.components.get("nvidia_driver")

    def to_dict(self) -> dict[str, Any]:
        return {"release_label": self.release_label, "release_date": self.release_date,
                "sha256": self.sha256, "components": dict(self.components)}


def parse_redistrib_manifest(content: bytes, *, url: str = "redistrib.json"
                             ) -> RedistribManifest:
    try:
        data = parse_json(content)
    except Malformed as exc:
        raise CudaError(f"{url}: {exc}") from None
    if not isinstance(data, dict) or "release_label" not in data:
        raise CudaError(f"{url}: no release_label; not a redistrib manifest")
    components = {}
    platforms = {}
    for name, entry in data.items():
        if isinstance(entry, dict) and "version" in entry:
            components[name] = str(entry["version"])
            platforms[name] = tuple(sorted(
                key for key, value in entry.items()
                if isinstance(value, dict) and "relative_path" in value))
    return RedistribManifest(
        release_label=str(data["release_label"]),
        release_date=data.get("release_date"),
        sha256=hashlib.sha256(content).hexdigest(),
        components=components,
        platforms=platforms,
    )
