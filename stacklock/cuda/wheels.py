"""A CUDA toolkit installed as PyPI wheels: where it is, read from what the wheels
installed.

NVIDIA's CUDA 13 wheels (``nvidia-cuda-nvcc``, ``-runtime``, ``-crt``,
``nvidia-nvvm``, pulled in by ``cuda-toolkit[nvcc]``) all install under one folder,
``site-packages/nvidia/cu13`` (``bin/nvcc``, ``include/``, ``lib/libcudart.so.13``,
``nvvm/bin/cicc``); the CUDA 12 wheels used one folder per component
(``nvidia/cuda_nvcc/bin/nvcc``). Rather than guess either layout, the finder reads
each installed distribution's ``RECORD`` and takes the folder that holds ``bin/nvcc``
(else ``include/cuda_runtime.h``, else ``lib/libcudart.so.*``): that folder is the
``CUDA_HOME`` JIT compilers need.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.record import parse_record, record_bytes

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["WheelToolkit", "find_wheel_toolkit", "site_packages"]


@dataclass(frozen=True, kw_only=True)
class WheelToolkit:
    """What the wheels installed: the home folder and who put ``nvcc`` there."""

    home: Path                      # CUDA_HOME
    nvcc: Path | None = None        # home/bin/nvcc, when a wheel installed one
    distribution: str               # the distribution whose RECORD names the marker
    version: str                    # its installed version
    marker: str                     # the RECORD entry that located home

    def to_dict(self) -> dict[str, str | None]:
        return {"cuda_home": str(self.home),
                "nvcc": str(self.nvcc) if self.nvcc else None,
                "distribution": self.distribution, "version": self.version,
                "marker": self.marker}


def site_packages(venv: Path) -> list[Path]:
    """The venv's ``lib/python3.*/site-packages`` folders."""
    return sorted(venv.glob("lib/python3.*/site-packages"))


def _rank(path: PurePosixPath) -> int | None:
    """0 for ``*/bin/nvcc``, 1 for ``*/include/cuda_runtime.h``, 2 for
    ``*/lib/libcudart.so*``; None for anything else."""
    parent = path.parent.name
    if parent == "bin" and path.name == "nvcc":
        return 0
    if parent == "include" and path.name == "cuda_runtime.h":
        return 1
    if parent in ("lib", "lib64") and path.name.startswith("libcudart.so"):
        return 2
    return None


_MARKS = (b"/nvcc", b"/cuda_runtime.h", b"/libcudart.so")


def _toolkit_entries(dist_info: Path) -> list[tuple[int, str]]:
    """(rank, path) of each file the distribution's RECORD names that
    :func:`_rank` ranks. A substring test on the bytes first: torch's RECORD
    alone has 16,000 rows, and few distributions name any of these."""
    content = record_bytes(dist_info)
    if content is None or not any(mark in content for mark in _MARKS):
        return []
    record = parse_record(content, where=str(dist_info / "RECORD"), installed=True)
    return [(rank, path) for path in record.entries
            if (rank := _rank(PurePosixPath(path))) is not None]


def _major(version: str) -> int | None:
    try:
        return Version(version).major
    except InvalidVersion:
        return None


def find_wheel_toolkit(sites: Iterable[Path], *,
                       major: int | None = None) -> WheelToolkit | None:
    """The toolkit the installed wheels hold in ``sites``, preferring one whose
    distribution's major version is ``major`` (a venv may carry CUDA 12 wheels
    beside CUDA 13 ones); None when no RECORD names nvcc, cuda_runtime.h or
    libcudart. Each distribution is named by its ``<name>-<version>.dist-info``
    folder, as installers write it."""
    found: list[tuple[int, int, str, WheelToolkit]] = []
    for site in sites:
        for dist_info in sorted(site.glob("*.dist-info")):
            name, _, version = dist_info.name.removesuffix(".dist-info").partition("-")
            if not name or not version:
                continue
            for rank, entry in _toolkit_entries(dist_info):
                home = (site / entry).parent.parent
                nvcc = home / "bin" / "nvcc"
                other = 0 if major is None or _major(version) == major else 1
                found.append((other, rank, entry, WheelToolkit(
                    home=home, nvcc=nvcc if nvcc.is_file() else None,
                    distribution=canonicalize_name(name), version=version,
                    marker=entry)))
    if not found:
        return None
    return min(found, key=lambda item: item[:3])[3]
