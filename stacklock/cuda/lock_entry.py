"""From a profile's ``[cuda]`` table to what the lock records.

``source = "runfile"`` gives the ``[tool.stacklock.cuda]`` table (see
docs/architecture.md): the runfile, its hashes and drivers, and the toolkit-only
install arguments (never the driver: the driver belongs to the host, and the
runfile's own would replace it).
``source = "pypi"`` gives a table saying so plus the ``cuda-toolkit`` requirement the
resolver adds; the toolkit then arrives as ordinary wheels. ``"none"`` gives nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from stacklock.errors import CudaError

if TYPE_CHECKING:
    from stacklock.cuda.catalog import Catalog
    from stacklock.profile import CudaSpec
    from stacklock.target import Target

__all__ = [
    "PYPI_TOOLKIT",
    "default_prefix",
    "install_args",
    "make_lock_entry",
    "pypi_requirements",
]

PYPI_TOOLKIT = "cuda-toolkit"
# cuda-toolkit's extras on PyPI (13.0.1 and newer, tests/data/cuda/ records them);
# a component outside this list is a typo, not something to pass through.
PYPI_COMPONENTS = frozenset({
    "all", "cccl", "crt", "cublas", "cudart", "cudla", "cufft", "cufile", "culibos",
    "cuobjdump", "cupti", "curand", "cusolver", "cusparse", "cuxxfilt", "npp", "nvcc",
    "nvdisasm", "nvfatbin", "nvjitlink", "nvjpeg", "nvml", "nvptxcompiler", "nvrtc",
    "nvtx", "nvvm", "opencl", "profiler", "sanitizer", "tileiras",
})


def default_prefix(version: str) -> str:
    """Where the runfile puts toolkit X.Y by default: /usr/local/cuda-X.Y."""
    v = Version(version)
    return f"/usr/local/cuda-{v.major}.{v.minor}"


def install_args(prefix: str) -> list[str]:
    """Toolkit-only, unattended runfile arguments, ``--override`` included (as
    Spack's cuda package passes it): without it the silent installer aborts when it
    finds no supported host compiler (an image with no gcc yet, a gcc newer than
    the release knows) or another toolkit, though neither changes a file it
    installs; nvcc still checks the host compiler each time it compiles, and
    preflight already refuses a prefix that holds something else."""
    return ["--silent", "--toolkit", "--override", f"--toolkitpath={prefix}",
            "--no-opengl-libs", "--no-man-page", "--no-drm"]


def _toolkit(cuda: CudaSpec) -> str:
    if cuda.toolkit is None:
        raise CudaError(f"[cuda] source {cuda.source!r} needs a toolkit version",
                        hint='e.g. toolkit = "13.0.1"')
    return cuda.toolkit


def pypi_requirements(cuda: CudaSpec, catalog: Catalog | None = None) -> list[str]:
    """The requirement the resolver adds for ``source = "pypi"``:
    ``cuda-toolkit[nvcc,cudart]==13.0.1``; nothing for other sources."""
    if cuda.source != "pypi":
        return []
    from stacklock.cuda.catalog import load_catalog  # only a toolkit needs it

    version = (catalog or load_catalog()).get(_toolkit(cuda)).version
    unknown = sorted(set(cuda.components) - PYPI_COMPONENTS)
    if unknown:
        raise CudaError(f"[cuda] components: {unknown[0]!r} is not an extra of "
                        f"{PYPI_TOOLKIT}",
                        hint="one of " + ", ".join(sorted(PYPI_COMPONENTS)))
    extras = ",".join(sorted(set(cuda.components)))
    return [f"{PYPI_TOOLKIT}[{extras}]=={version}" if extras
            else f"{PYPI_TOOLKIT}=={version}"]


def make_lock_entry(cuda: CudaSpec, target: Target, catalog: Catalog | None = None
                    ) -> dict[str, Any] | None:
    """The ``[tool.stacklock.cuda]`` table for ``cuda`` on ``target``; None for
    ``source = "none"``. Keys in docs/architecture.md order; a value the catalog
    does not know is left out (TOML has no null), never guessed."""
    if cuda.source == "none":
        return None
    from stacklock.cuda.catalog import load_catalog, platform_for_target

    catalog = catalog or load_catalog()
    release = catalog.get(_toolkit(cuda))
    platform = platform_for_target(target.platform)
    if cuda.source == "pypi":
        return _known({
            "version": release.version,
            "source": "pypi",
            "platform": platform,
            "requirements": pypi_requirements(cuda, catalog),
            "min-driver": release.min_driver,
            "compat-floor": release.compat_floor,
        })
    if cuda.source != "runfile":
        raise CudaError(f"[cuda] source {cuda.source!r} is not runfile, pypi or none")
    rf = release.runfile(platform)
    if rf is None or rf.runfile is None or rf.url is None:
        have = sorted(release.runfiles)
        raise CudaError(
            f"CUDA {release.version} has no {platform} runfile in the catalog",
            hint=("platforms with a runfile: " + ", ".join(have)) if have
            else "choose another toolkit (stacklock cuda list)")
    try:
        prefix = cuda.prefix or default_prefix(release.version)
    except InvalidVersion:  # pragma: no cover - catalog versions are valid
        raise CudaError(f"bad toolkit version {release.version!r}") from None
    return _known({
        "version": release.version,
        "source": "runfile",
        "platform": platform,
        "runfile": rf.runfile,
        "url": rf.url,
        "size": rf.size,
        "md5": rf.md5,
        "sha256": rf.sha256,
        "bundled-driver": rf.bundled_driver,
        "min-driver": release.min_driver,
        "compat-floor": release.compat_floor,
        "prefix": prefix,
        "install-args": install_args(prefix),
    })


def _known(table: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in table.items() if value is not None}
