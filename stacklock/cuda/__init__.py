"""CUDA toolkit: the release catalog, the lock entry, driver checks, coherence.

The catalog ships with stacklock and works offline; ``refresh_catalog`` checks it
against NVIDIA when NVIDIA can be reached.
"""

from __future__ import annotations

from stacklock.cuda.catalog import (
    Catalog,
    CudaRelease,
    Runfile,
    load_catalog,
    render_release,
    render_releases,
)
from stacklock.cuda.coherence import (
    CoherenceFinding,
    CudaMixError,
    CudaTarget,
    PackageInfo,
    check_coherence,
    render_coherence,
    wheel_cuda,
)
from stacklock.cuda.driver import (
    DriverInfo,
    DriverReport,
    check_driver,
    parse_nvcc_version,
    parse_version_json,
    read_driver,
    render_driver_report,
)
from stacklock.cuda.entry import make_lock_entry, pypi_requirements
from stacklock.cuda.refresh import RefreshReport, refresh_catalog, render_refresh

__all__ = [
    "Catalog",
    "CoherenceFinding",
    "CudaMixError",
    "CudaRelease",
    "CudaTarget",
    "DriverInfo",
    "DriverReport",
    "PackageInfo",
    "RefreshReport",
    "Runfile",
    "check_coherence",
    "check_driver",
    "load_catalog",
    "make_lock_entry",
    "parse_nvcc_version",
    "parse_version_json",
    "pypi_requirements",
    "read_driver",
    "refresh_catalog",
    "render_coherence",
    "render_driver_report",
    "render_refresh",
    "render_release",
    "render_releases",
    "wheel_cuda",
]
