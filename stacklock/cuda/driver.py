"""The local NVIDIA driver and the toolkit on disk: read them, compare them.

The rule stacklock applies (NVIDIA CUDA Toolkit Release Notes, Tables 2 and 3):

* **pass** - the driver is at least Table 3's minimum for the toolkit: everything
  works, PTX JIT compilation included.
* **compat-only** (a fail) - the driver is below that minimum but at least the
  major's minor-version-compatibility floor (13.x >= 580, 12.x >= 525). Binaries
  built with the toolkit load, but PTX the driver is too old to JIT-compile and APIs
  newer than the driver fail. stacklock does not call that "runs": 580.159.04 with
  13.1 (minimum 590.44.01) is a fail, reported as compat-only.
* **too-old** - below the floor: nothing built with the toolkit runs.
* **unverified** (a fail) - Table 3 has no row for the toolkit and the driver is
  older than the runfile's bundled driver, so nothing proves it works.

When Table 3 has no row, a driver at least as new as the runfile's bundled driver
passes: the runfile is shipped to be run with exactly that driver.
A wheel that targets CUDA X.Y (``+cu130``) is checked against the X.Y GA release.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from stacklock.bounded import Malformed, parse_json
from stacklock.errors import CudaError, NoDriverError
from stacklock.runner import SubprocessRunner
from stacklock.words import first

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from stacklock.cuda.catalog import Catalog, CudaRelease
    from stacklock.cuda.coherence import CudaTarget
    from stacklock.lock import Lock, LockedPackage
    from stacklock.runner import Runner

__all__ = [
    "DRIVER_ENV",
    "DriverCheck",
    "DriverInfo",
    "DriverReport",
    "NvccVersion",
    "ToolkitVersion",
    "check_driver",
    "check_toolkit_driver",
    "lock_cuda",
    "parse_driver_version",
    "parse_nvcc_version",
    "parse_nvidia_smi",
    "parse_nvidia_smi_csv",
    "parse_proc_driver_version",
    "parse_version_json",
    "read_driver",
    "render_driver_report",
]

DRIVER_ENV = "STACKLOCK_DRIVER_VERSION"
NVIDIA_SMI_QUERY = ("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
_DRIVER_RE = re.compile(r"^\d{3}\.\d+(?:\.\d+)?$")
_PROC_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d{3}\.\d+(?:\.\d+)?)\s")
_SMI_RE = re.compile(r"Driver Version:\s*(\S+)\s+CUDA Version:\s*(\S+)")
_NVCC_RE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")


def parse_driver_version(text: str, *, where: str = "driver version") -> str:
    """``580.159.04`` (as in /sys/module/nvidia/version or the env override)."""
    value = text.strip()
    if not _DRIVER_RE.match(value):
        raise CudaError(f"{where}: {value!r} is not an NVIDIA driver version",
                        hint="expected something like 580.159.04")
    return value


def parse_proc_driver_version(text: str) -> str:
    """The driver from ``/proc/driver/nvidia/version`` (``NVRM version: ...``)."""
    m = _PROC_RE.search(text)
    if m is None:
        raise CudaError("/proc/driver/nvidia/version: no 'Kernel Module <version>' "
                        f"in {text.strip()[:80]!r}")
    return m.group(1)


def parse_nvidia_smi(text: str) -> tuple[str, str]:
    """``(driver, highest CUDA the driver supports)`` from ``nvidia-smi``'s table."""
    m = _SMI_RE.search(text)
    if m is None:
        raise CudaError("nvidia-smi: no 'Driver Version: ... CUDA Version: ...' header")
    return parse_driver_version(m.group(1), where="nvidia-smi"), m.group(2)


def parse_nvidia_smi_csv(text: str, *, fields: Sequence[str] = ("driver_version",)
                         ) -> str:
    """The driver from ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader]``:
    one line per GPU (a host runs one driver on all of them). With a header line
    (``--format=csv``) the header names the columns, else ``fields`` does."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    columns = [f.strip() for f in fields]
    if lines and "driver_version" in [c.strip() for c in lines[0].split(",")]:
        columns = [c.strip() for c in lines[0].split(",")]
        lines = lines[1:]
    if "driver_version" not in columns:
        raise CudaError("nvidia-smi --query-gpu: driver_version was not queried")
    at = columns.index("driver_version")
    values = set()
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(columns):
            raise CudaError(f"nvidia-smi --query-gpu: {line.strip()!r} does not have "
                            f"the {len(columns)} columns {', '.join(columns)}")
        values.add(cells[at])
    if len(values) != 1:
        raise CudaError(f"nvidia-smi --query-gpu: expected one driver version, got "
                        f"{sorted(values)!r}")
    return parse_driver_version(values.pop(), where="nvidia-smi --query-gpu")


@dataclass(frozen=True, kw_only=True)
class NvccVersion:
    release: str          # "13.0": what nvcc was released as
    version: str          # "13.0.88": the nvcc component version

    def to_dict(self) -> dict[str, str]:
        return {"release": self.release, "version": self.version}


def parse_nvcc_version(text: str) -> NvccVersion:
    """``nvcc --version`` -> release 13.0, version 13.0.88."""
    m = _NVCC_RE.search(text)
    if m is None:
        raise CudaError("nvcc --version: no 'release X.Y, VX.Y.Z' line",
                        hint="is this the output of nvcc --version?")
    return NvccVersion(release=m.group(1), version=m.group(2))


@dataclass(frozen=True, kw_only=True)
class ToolkitVersion:
    """A toolkit on disk, from its ``version.json``."""

    release: str                 # "13.0.1"; "12.6" when the file carries a date stamp
    raw: str                     # as written: "13.0.1", "12.6.20241114"
    components: dict[str, str]   # cuda_nvcc -> 13.0.88, ...

    def to_dict(self) -> dict[str, object]:
        return {"release": self.release, "raw": self.raw,
                "components": dict(self.components)}


def parse_version_json(content: bytes | str) -> ToolkitVersion:
    """``<toolkit>/version.json``: ``{"cuda": {"name": "CUDA SDK", "version": ...},
    "cuda_nvcc": {...}, ...}``. Some releases write a build date as the third field
    of the ``cuda`` version (``12.6.20241114``); then only X.Y is the release."""
    try:
        data = parse_json(content)
    except Malformed as exc:
        raise CudaError(f"version.json: {exc}") from None
    cuda = data.get("cuda") if isinstance(data, dict) else None
    if not isinstance(cuda, dict) or "version" not in cuda:
        raise CudaError("version.json has no 'cuda' version",
                        hint="expected the version.json of a CUDA toolkit")
    raw = str(cuda["version"])
    try:
        parsed = Version(raw)
    except InvalidVersion:
        raise CudaError(f"version.json: cuda {raw!r} is not a version") from None
    release = raw
    if len(parsed.release) >= 3 and parsed.release[2] >= 10_000_000:
        release = f"{parsed.major}.{parsed.minor}"
    components = {
        name: str(entry["version"])
        for name, entry in sorted(data.items())
        if name != "cuda" and isinstance(entry, dict) and "version" in entry
    }
    return ToolkitVersion(release=release, raw=raw, components=components)


@dataclass(frozen=True, kw_only=True)
class DriverInfo:
    version: str
    source: str  # the env variable, /sys/..., /proc/..., or nvidia-smi

    def to_dict(self) -> dict[str, str]:
        return {"version": self.version, "source": self.source}


def read_driver(*, env: Mapping[str, str] | None = None, root: Path = Path("/"),
                runner: Runner | None = None) -> DriverInfo:
    """The local driver: ``$STACKLOCK_DRIVER_VERSION``, else /sys, /proc, nvidia-smi."""
    env = os.environ if env is None else env
    if env.get(DRIVER_ENV):
        version = parse_driver_version(env[DRIVER_ENV], where=DRIVER_ENV)
        return DriverInfo(version=version, source=DRIVER_ENV)
    sys_file = root / "sys/module/nvidia/version"
    proc_file = root / "proc/driver/nvidia/version"
    tried = []
    for path, parse in ((sys_file, parse_driver_version),
                        (proc_file, parse_proc_driver_version)):
        try:
            text = path.read_text()
        except OSError:
            tried.append(f"/{path.relative_to(root)}")
            continue
        return DriverInfo(version=parse(text), source=f"/{path.relative_to(root)}")
    rc, out = (runner or SubprocessRunner()).capture(NVIDIA_SMI_QUERY, timeout=30)
    if rc != 0:
        tried.append(f"nvidia-smi ({'not found' if rc == 127 else f'exit {rc}'})")
        raise NoDriverError(
            "no NVIDIA driver found: tried " + ", ".join(tried), tried=tried,
            hint=f"on a machine without a GPU set {DRIVER_ENV}=580.159.04",
        ) from None
    return DriverInfo(version=parse_nvidia_smi_csv(out), source="nvidia-smi")


@dataclass(frozen=True, kw_only=True)
class DriverCheck:
    """One verdict: does the driver run ``subject`` (a toolkit or a wheel's CUDA)?"""

    subject: str                # "toolkit 13.1.0" or "torch (CUDA 13.0)"
    cuda: str                   # the release checked against
    verdict: str                # pass | compat-only | too-old | unverified | no-driver
    min_driver: str | None
    compat_floor: str | None
    reason: str

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self) -> dict[str, object]:
        return {"subject": self.subject, "cuda": self.cuda, "verdict": self.verdict,
                "ok": self.ok, "min_driver": self.min_driver,
                "compat_floor": self.compat_floor, "reason": self.reason}


def _verdict(driver: str | None, release: CudaRelease) -> tuple[str, str]:
    if driver is None:
        return "no-driver", "no NVIDIA driver on this machine runs it"
    rf = release.runfile("linux-x86_64")
    bundled = rf.bundled_driver if rf is not None else None
    floor, minimum, version = release.compat_floor, release.min_driver, release.version
    have = Version(driver)
    if minimum and have >= Version(minimum):
        return "pass", (f"driver {driver} >= {minimum}, the Table 3 minimum for "
                        f"CUDA {version}")
    if not minimum and bundled and have >= Version(bundled):
        return "pass", (f"Table 3 has no row for {version}; driver {driver} >= "
                        f"{bundled}, the driver its runfile bundles")
    if floor and have >= Version(floor) and minimum:
        return "compat-only", (
            f"driver {driver} < {minimum}, the Table 3 minimum for CUDA {version}; "
            f"it is above the {floor} floor, so it runs with minor-version "
            "compatibility only (PTX JIT unavailable, newer APIs fail)")
    if floor and have >= Version(floor):
        return "unverified", (
            f"Table 3 has no row for {version} and driver {driver} is older than "
            f"the bundled {bundled}; above the {floor} floor it may run with "
            "minor-version compatibility only")
    if floor:
        return "too-old", (f"driver {driver} is below {floor}, the minor-version "
                           f"compatibility floor of CUDA {release.parsed.major}.x")
    return "unverified", f"no minimum driver known for CUDA {version}"


def check_toolkit_driver(driver: str | None, release: CudaRelease, *,
                         subject: str | None = None) -> DriverCheck:
    """Apply the module's rule to one ``CudaRelease``."""
    verdict, reason = _verdict(driver, release)
    return DriverCheck(subject=subject or f"toolkit {release.version}",
                       cuda=release.version, verdict=verdict,
                       min_driver=release.min_driver,
                       compat_floor=release.compat_floor, reason=reason)


@dataclass(frozen=True, kw_only=True)
class DriverReport:
    driver: DriverInfo | None  # None: no driver found (``missing`` says where)
    checks: tuple[DriverCheck, ...] = field(default_factory=tuple)
    missing: str | None = None

    @property
    def ok(self) -> bool:
        return self.driver is not None and all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, object]:
        return {"driver": self.driver.to_dict() if self.driver else None,
                "missing": self.missing, "ok": self.ok,
                "checks": [c.to_dict() for c in self.checks]}


def check_driver(catalog: Catalog, driver: DriverInfo | None, *,
                 toolkit: str | None = None,
                 wheels: Mapping[str, str] | None = None,
                 missing: str | None = None) -> DriverReport:
    """Check ``driver`` against a toolkit version and the CUDA ``X.Y`` each wheel
    targets (``{"torch": "13.0"}``). Unknown versions raise CudaError. No
    driver (``None``; ``missing`` says what was tried) runs none of them: each
    check's verdict is ``no-driver``."""
    have = driver.version if driver is not None else None
    checks = []
    if toolkit is not None:
        release = catalog.get(toolkit, series=True)
        subject = f"toolkit {release.version}" + (
            f" (for {toolkit}: its GA release)" if release.version != toolkit else "")
        checks.append(check_toolkit_driver(have, release, subject=subject))
    for name, cuda in sorted((wheels or {}).items()):
        # the oldest release of the series the wheel targets: "13.0" -> 13.0.0
        try:
            ga = catalog.get(cuda, series=True)
        except CudaError:
            raise CudaError(f"{name} targets CUDA {cuda}, not in the catalog",
                            hint="stacklock cuda list shows the known releases"
                            ) from None
        checks.append(check_toolkit_driver(have, ga,
                                           subject=f"{name} (CUDA {cuda})"))
    if not checks:
        raise CudaError("nothing to check the driver against",
                        hint="give a toolkit version or --lock with a CUDA entry")
    return DriverReport(driver=driver, checks=tuple(checks), missing=missing)


def lock_cuda(lock: Lock) -> tuple[str | None, dict[str, str]]:
    """What a lock asks of the driver: the toolkit of ``[tool.stacklock.cuda]``
    and the CUDA each package's wheel targets (``[packages.tool.stacklock] cuda``)."""
    toolkit = lock.cuda.version if lock.cuda is not None else None
    wheels = {str(p.name): p.cuda for p in lock.packages if p.cuda is not None}
    return toolkit, wheels


def infer_cuda(packages: Sequence[LockedPackage]) -> dict[str, CudaTarget]:
    """The CUDA each package targets in a lock another tool wrote (no
    ``[packages.tool.stacklock] cuda``), from what the lock holds: a ``+cuXYZ``
    local version, else the ``nvidia-*-cuNN`` / CUDA runtime projects it is or
    depends on, at their locked versions (``nvidia-cuda-runtime-cu12 12.8.90``
    -> 12.8), as :func:`~stacklock.cuda.coherence.wheel_cuda` reads a wheel's
    metadata. A package naming two CUDA majors says nothing here."""
    from stacklock.cuda.coherence import PackageInfo, wheel_cuda
    from stacklock.errors import CudaMixError

    versions = {str(p.name): str(p.version) for p in packages if p.version}
    out = {}
    for p in packages:
        if p.version is None:
            continue
        named = (str(p.name), *p.dependencies)
        info = PackageInfo(name=str(p.name), version=str(p.version),
                           requires_dist=tuple(f"{n}=={versions[n]}" for n in named
                                               if n in versions))
        try:
            target = wheel_cuda(info)
        except CudaMixError:
            continue
        if target is not None:
            out[str(p.name)] = target
    return out


def describe_inferred(inferred: Mapping[str, CudaTarget]) -> str:
    """One line: what CUDA a foreign lock was found to need, and from what."""
    by_cuda: dict[str, list[str]] = {}
    for name, target in sorted(inferred.items()):
        by_cuda.setdefault(target.cuda, []).append(name)
    parts = []
    for cuda, names in sorted(by_cuda.items()):
        why = inferred[names[0]].evidence
        parts.append(f"CUDA {cuda} for {first(names, 3)} (e.g. {why})")
    return "no [tool.stacklock] in the lock: the driver check is for the CUDA " \
        "inferred from its packages: " + "; ".join(parts)


def render_driver_report(report: DriverReport) -> str:
    lines = [f"driver {report.driver.version} (from {report.driver.source})"
             if report.driver else f"no driver: {report.missing}"]
    for c in report.checks:
        mark = "ok  " if c.ok else "FAIL"
        lines.append(f"  {mark} {c.subject}: {c.verdict} - {c.reason}")
    lines.append("verdict: " + ("the driver runs all of it" if report.ok
                                else "the driver cannot run all of it"
                                if report.driver else "no driver runs any of it"))
    return "\n".join(lines)
