"""Build stacklock/data/cuda_releases.json from the recorded real sources.

Every value in the output carries the name of the source it came from; a value no
source gives is null, never derived by guesswork. Where two sources give the same
value (the runfile name from spack's URL and from the rwgk catalog) they must agree,
otherwise the build fails. Run from the repository root:

    .venv/bin/python scripts/build_cuda_catalog.py [--check]

``--check`` rebuilds in memory and exits 1 if the shipped file differs.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "data" / "real"
OUTPUT = ROOT / "stacklock" / "data" / "cuda_releases.json"

SOURCES: dict[str, dict[str, str]] = {
    "spack": {
        "file": "tests/data/real/spack-cuda-runfile-sha256.tsv",
        "what": "runfile sha256 and URL (spack/spack-packages cuda/package.py)",
        "origin": "https://github.com/spack/spack-packages/blob/"
        "1e8cf059e35d55c4fe1142fed41785bedf6c7246/repos/spack_repo/builtin/"
        "packages/cuda/package.py",
    },
    "rwgk": {
        "file": "tests/data/real/nvidia-runfile-md5-size-rwgk-catalog.tsv",
        "what": "runfile md5 and byte size copied from NVIDIA's download pages "
        "(rwgk/rwgk_config bin/ctk_download_installers.sh)",
        "origin": "https://github.com/rwgk/rwgk_config/blob/"
        "6119ce8a39f9605cf744f82e244162cc31451b79/bin/ctk_download_installers.sh",
    },
    "table3": {
        "file": "tests/data/real/nvidia-cuda-min-driver-table3.tsv",
        "what": "minimum Linux driver, NVIDIA CUDA Toolkit Release Notes Table 3",
        "origin": "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/",
    },
    "table2": {
        "file": "tests/data/real/nvidia-cuda-min-driver-table3.tsv (header)",
        "what": "minor-version compatibility floor per CUDA major, NVIDIA Release "
        "Notes Table 2 as quoted in the Table 3 file header",
        "origin": "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/",
    },
    "redistrib-sha256": {
        "file": "tests/data/real/redistrib-json-sha256-rules_ml_toolchain.tsv",
        "what": "sha256 of NVIDIA's redistrib_<version>.json manifest "
        "(google-ml-infra/rules_ml_toolchain cuda_redist_versions.bzl)",
        "origin": "https://github.com/google-ml-infra/rules_ml_toolchain/blob/"
        "b11745590f513ec55b32e2d126073576fde18c71/gpu/cuda/cuda_redist_versions.bzl",
    },
    "redistrib-json": {
        "file": "tests/data/real/redistrib_<version>.json",
        "what": "NVIDIA's redistrib manifest: release date, nvcc and driver versions",
        "origin": "https://developer.download.nvidia.com/compute/cuda/redist/",
    },
    "runfile-name": {
        "file": "-",
        "what": "the bundled driver is the third field of NVIDIA's runfile name "
        "cuda_<version>_<driver>_linux[_sbsa].run",
        "origin": "-",
    },
}

URL_BASE = "https://developer.download.nvidia.com/compute/cuda"
_RUNFILE_RE = re.compile(
    r"^cuda_(?P<version>\d+\.\d+\.\d+)_(?P<driver>\d+\.\d+(?:\.\d+)?)_linux"
    r"(?P<sbsa>_sbsa)?\.run$"
)
_SPACK_PLATFORMS = {"Linux-x86_64": "linux-x86_64", "Linux-aarch64": "linux-sbsa"}
_RWGK_PLATFORMS = {"linux-amd64": "linux-x86_64", "linux-arm64": "linux-sbsa"}
_FLOOR_RE = re.compile(r"(\d+)\.x\s*>=\s*(\d+(?:\.\d+)*)")
FIRST_MAJOR = 11  # older runfiles are named differently (cuda_9.0.176_384.81_linux-run)


def _rows(path: Path) -> list[dict[str, str]]:
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


def _sourced(value: Any, source: str) -> dict[str, Any]:
    return {"value": value, "source": source}


def _floors(path: Path) -> dict[str, dict[str, Any]]:
    header = " ".join(ln for ln in path.read_text().splitlines() if ln.startswith("#"))
    floors = {}
    for major, driver in _FLOOR_RE.findall(header):
        text = driver if "." in driver else f"{driver}.0"
        floors[major] = _sourced(text, "table2")
    if not floors:
        raise SystemExit(f"{path}: no 'N.x >= DRIVER' floors in the header")
    return floors


def build(real: Path = REAL) -> dict[str, Any]:
    releases: dict[str, dict[str, Any]] = {}

    def platform_entry(version: str, platform: str) -> dict[str, Any]:
        rel = releases.setdefault(version, {"version": version, "platforms": {}})
        return rel["platforms"].setdefault(platform, {})  # type: ignore[no-any-return]

    def set_runfile(
        version: str, entry: dict[str, Any], name: str, url: str, source: str
    ) -> None:
        m = _RUNFILE_RE.match(name)
        if m is None or m["version"] != version:
            raise SystemExit(f"unexpected runfile name {name!r} ({source})")
        if url != f"{URL_BASE}/{version}/local_installers/{name}":
            raise SystemExit(f"unexpected runfile URL {url!r} ({source})")
        old = entry.get("runfile")
        if old is not None and old["value"] != name:
            raise SystemExit(f"runfile disagrees: {old} vs {name} ({source})")
        if old is not None:
            for key in ("runfile", "url"):
                entry[key]["source"] += f"+{source}"
            return
        entry["runfile"] = _sourced(name, source)
        entry["url"] = _sourced(url, source)
        entry["bundled_driver"] = _sourced(m["driver"], "runfile-name")

    for row in _rows(real / "spack-cuda-runfile-sha256.tsv"):
        platform = _SPACK_PLATFORMS.get(row["platform"])
        if platform is None or Version(row["version"]).major < FIRST_MAJOR:
            continue
        entry = platform_entry(row["version"], platform)
        name = row["url"].rsplit("/", 1)[1]
        set_runfile(row["version"], entry, name, row["url"], "spack")
        entry["sha256"] = _sourced(row["sha256"], "spack")

    for row in _rows(real / "nvidia-runfile-md5-size-rwgk-catalog.tsv"):
        platform = _RWGK_PLATFORMS[row["PLATFORM"]]
        entry = platform_entry(row["VERSION"], platform)
        set_runfile(row["VERSION"], entry, row["FILENAME"], row["URL"], "rwgk")
        entry["md5"] = _sourced(row["MD5"], "rwgk")
        entry["size"] = _sourced(int(row["BYTES"]), "rwgk")

    table3 = {r["toolkit"]: r["min_driver_linux"]
              for r in _rows(real / "nvidia-cuda-min-driver-table3.tsv")}
    redist = {r["version"]: r["sha256"]
              for r in _rows(real / "redistrib-json-sha256-rules_ml_toolchain.tsv")}
    floors = _floors(real / "nvidia-cuda-min-driver-table3.tsv")

    out = []
    for version in sorted(releases, key=Version, reverse=True):
        rel = releases[version]
        major = str(Version(version).major)
        manifest = real / f"redistrib_{version}.json"
        info: dict[str, Any] = {}
        if manifest.is_file():
            raw = manifest.read_bytes()
            data = json.loads(raw)
            if data.get("release_label") != version:
                raise SystemExit(f"{manifest}: wrong release_label")
            if version in redist and hashlib.sha256(raw).hexdigest() != redist[version]:
                raise SystemExit(f"{manifest}: sha256 differs from rules_ml_toolchain")
            info = {
                "release_date": _sourced(data["release_date"], "redistrib-json"),
                "nvcc_version": _sourced(data["cuda_nvcc"]["version"],
                                         "redistrib-json"),
            }
            driver = data.get("nvidia_driver", {}).get("version")
            for entry in rel["platforms"].values():
                if driver and entry["bundled_driver"]["value"] == driver:
                    entry["bundled_driver"]["source"] = "runfile-name+redistrib-json"
                elif driver:
                    raise SystemExit(f"{manifest}: nvidia_driver {driver} disagrees "
                                     f"with {entry['runfile']['value']}")
        out.append({
            "version": version,
            "release_date": info.get("release_date", _sourced(None, "none")),
            "nvcc_version": info.get("nvcc_version", _sourced(None, "none")),
            "min_driver": _sourced(table3[version], "table3") if version in table3
            else _sourced(None, "none"),
            "compat_floor": floors.get(major, _sourced(None, "none")),
            "redistrib_sha256": _sourced(redist[version], "redistrib-sha256")
            if version in redist else _sourced(None, "none"),
            "platforms": {
                name: {
                    key: entry.get(key, _sourced(None, "none"))
                    for key in ("runfile", "url", "bundled_driver", "size", "md5",
                                "sha256")
                }
                for name, entry in sorted(rel["platforms"].items())
            },
        })
    return {
        "schema": 1,
        "generated-by": "scripts/build_cuda_catalog.py",
        "url-base": URL_BASE,
        "sources": SOURCES,
        "releases": out,
    }


def render(catalog: dict[str, Any]) -> bytes:
    return (json.dumps(catalog, indent=1, sort_keys=False) + "\n").encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the shipped file is not what the sources give")
    args = parser.parse_args(argv)
    data = render(build())
    if args.check:
        same = OUTPUT.is_file() and OUTPUT.read_bytes() == data
        print(f"{OUTPUT}: {'up to date' if same else 'differs from the sources'}")
        return 0 if same else 1
    OUTPUT.write_bytes(data)
    print(f"wrote {OUTPUT} ({len(build()['releases'])} releases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
