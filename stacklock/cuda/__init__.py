"""CUDA toolkit: the release catalog, the lock entry, driver checks, coherence.

The catalog ships with stacklock and works offline; ``refresh_catalog`` checks it
against NVIDIA when NVIDIA can be reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock._lazy import lazy_exports

if TYPE_CHECKING:
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
    from stacklock.cuda.lock_entry import make_lock_entry, pypi_requirements
    from stacklock.cuda.refresh import RefreshReport, refresh_catalog, render_refresh

# Each name loads its module on first use (PEP 562): a resolution needs only
# coherence (and the catalog when the profile declares a toolkit), a driver
# check only the driver module, and the refresh names pull in the NVIDIA page
# scraper and BeautifulSoup (60 ms).
_MODULES = {
    "catalog": ("Catalog", "CudaRelease", "Runfile", "load_catalog",
                "render_release", "render_releases"),
    "coherence": ("CoherenceFinding", "CudaTarget", "PackageInfo",
                  "check_coherence", "render_coherence", "wheel_cuda"),
    "driver": ("DriverInfo", "DriverReport", "check_driver", "parse_nvcc_version",
               "parse_version_json", "read_driver", "render_driver_report"),
    "lock_entry": ("make_lock_entry", "pypi_requirements"),
    "refresh": ("RefreshReport", "refresh_catalog", "render_refresh"),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "Catalog",
    "CoherenceFinding",
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
