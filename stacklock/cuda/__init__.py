"""CUDA toolkit: the release catalog, the lock entry, driver checks, coherence.

The catalog ships with stacklock and works offline; ``refresh_catalog`` checks it
against NVIDIA when NVIDIA can be reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from stacklock.cuda.refresh import RefreshReport, refresh_catalog, render_refresh

# The refresh names pull in the NVIDIA page scraper and BeautifulSoup (60 ms);
# resolving a lock needs only the catalog, so they load on first use (PEP 562).
_LAZY = frozenset({"RefreshReport", "refresh_catalog", "render_refresh"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from stacklock.cuda import refresh

        return getattr(refresh, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
