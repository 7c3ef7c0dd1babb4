"""The CUDA toolkit from a runfile: fetch resumably, verify twice, install beside.

The runfile is fetched through the artifact store (HTTP Range resume, sha256),
checked against the lock's md5 too (NVIDIA publishes md5; the lock pins both),
then run toolkit-only into its own versioned prefix. ``--driver`` is never passed:
:func:`runfile_argv` refuses it even if a lock asks.
"""

from __future__ import annotations

import contextlib
import hashlib
import shlex
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock._fs import atomic_write_text
from stacklock.errors import InstallError
from stacklock.install.cuda_link import (
    point_link,
    read_link_state,
    restore_link_state,
)
from stacklock.install.plan import DRIVER_FLAGS
from stacklock.install.preflight import toolkit_installed
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from stacklock.install.plan import InstallPlan
    from stacklock.lock import CudaEntry
    from stacklock.runner import Runner
    from stacklock.store import ArtifactStore

SYSTEM_INSTALLER_LOG = Path("/var/log/cuda-installer.log")  # where root's run logs

__all__ = [
    "fetch_runfile",
    "install_toolkit",
    "link_cuda",
    "pypi_toolkit_home",
    "runfile_argv",
    "write_activation",
]


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_runfile(
    toolkit: CudaEntry,
    *,
    store: ArtifactStore,
    http: httpx.Client,
    progress: Callable[[int, int | None], None] | None = None,
) -> Path:
    """The verified runfile in the store (downloaded, or resumed, if needed)."""
    assert toolkit.url and toolkit.sha256 and toolkit.md5
    path, _ = store.fetch(
        http,
        toolkit.url,
        expected_sha256=toolkit.sha256,
        size=toolkit.size,
        progress=progress,
    )
    md5 = _md5(path)
    if md5 != toolkit.md5:
        raise InstallError(
            f"{redact_url(toolkit.url)}: sha256 matches but md5 is {md5}, the lock "
            f"says {toolkit.md5}",
            hint="the lock's tool.stacklock.cuda entry is inconsistent; re-resolve",
        )
    return path


def runfile_argv(plan: InstallPlan, runfile: Path) -> tuple[str, ...]:
    """The exact command, with the store path filled in; toolkit-only, always."""
    assert plan.runfile_command is not None
    sh, _, *args = plan.runfile_command
    if "--toolkit" not in args or any(a.split("=", 1)[0] in DRIVER_FLAGS for a in args):
        raise InstallError(f"refusing runfile arguments {args}: toolkit only")
    return (sh, str(runfile), *args)


def install_toolkit(
    plan: InstallPlan,
    runfile: Path,
    *,
    runner: Runner,
    log: Path,
    installer_log: Path,
    system_log: Path = SYSTEM_INSTALLER_LOG,
    cuda_link: Path | None = None,
    notes: list[str] | None = None,
) -> dict[str, Path]:
    """Run the runfile into ``plan.toolkit_prefix``; returns the logs it kept.

    A run that fails removes the prefix it created, so the machine is left as it
    was. Our own stale installer log is moved into the logs folder first (another
    user's was refused by preflight); the new one is kept there afterwards and
    removed from /tmp so it cannot break the next user's run. Run as root, the
    installer logs to /var/log instead; a copy of what this run wrote is kept.
    ``cuda_link`` (``/usr/local/cuda``) is read before the run and put back after
    it, whatever the runfile did (:mod:`~stacklock.install.cuda_link`); what was
    put back is added to ``notes``.
    """
    assert plan.toolkit is not None and plan.toolkit_prefix is not None
    prefix = plan.toolkit_prefix
    kept: dict[str, Path] = {}
    if installer_log.exists():
        old = log.with_name(log.stem + "-previous-cuda-installer.log")
        shutil.move(installer_log, old)
        kept["previous-cuda-installer"] = old
    argv = runfile_argv(plan, runfile)
    tmpdir = next(Path(a.split("=", 1)[1]) for a in argv if a.startswith("--tmpdir="))
    tmpdir.mkdir(parents=True, exist_ok=True)
    existed = prefix.exists()
    started = time.time()
    link_before = read_link_state(cuda_link) if cuda_link is not None else None
    try:
        rc = runner.run(argv, log=log, env={"TMPDIR": str(tmpdir)})
    finally:
        if link_before is not None:
            note = restore_link_state(link_before)
            if note is not None and notes is not None:
                notes.append(note)
    with contextlib.suppress(OSError):
        if system_log.stat().st_mtime >= started:
            copy = log.with_name(log.stem + "-cuda-installer-system.log")
            shutil.copyfile(system_log, copy)
            kept["cuda-installer-system"] = copy
    if installer_log.exists():
        new = log.with_name(log.stem + "-cuda-installer.log")
        shutil.move(installer_log, new)
        kept["cuda-installer"] = new
    shutil.rmtree(tmpdir, ignore_errors=True)
    if rc != 0 or not toolkit_installed(prefix, plan.toolkit.version):
        if not existed:
            shutil.rmtree(prefix, ignore_errors=True)
        why = f"exit code {rc}" if rc else f"no CUDA {plan.toolkit.version} in {prefix}"
        raise InstallError(
            f"runfile install failed ({why}); the venv was not changed",
            hint=f"read the log {log}",
        )
    return kept


def link_cuda(link: Path, prefix: Path) -> None:
    """Re-point ``/usr/local/cuda`` (only when asked): an atomic symlink swap."""
    point_link(link, str(prefix))


def pypi_toolkit_home(venv: Path, version: str) -> Path | None:
    """CUDA_HOME of a ``source = "pypi"`` toolkit: the folder the installed
    wheels' RECORD puts ``bin/nvcc`` in (``site-packages/nvidia/cu13`` for the
    CUDA 13 wheels), which JIT compilers need; None without such wheels."""
    # the CUDA package (catalog, driver, wheels): only a pypi toolkit's install
    from packaging.version import InvalidVersion, Version

    from stacklock.cuda.wheels import find_wheel_toolkit, site_packages

    try:
        major = Version(version).major
    except InvalidVersion:
        major = None
    kit = find_wheel_toolkit(site_packages(venv), major=major)
    return kit.home if kit is not None else None


def write_activation(path: Path, *, venv: Path, prefix: Path | None) -> Path:
    """``source`` it: the venv plus CUDA_HOME, PATH and LD_LIBRARY_PATH."""
    lines = [
        "# generated by stacklock install; source this file",
        f". {shlex.quote(str(venv / 'bin' / 'activate'))}",
    ]
    if prefix is not None:
        # runfile toolkits keep libraries in lib64, the pip wheels in lib
        libdir = "lib" if (prefix / "lib").is_dir() and not (
            prefix / "lib64").exists() else "lib64"
        lines += [
            f"export CUDA_HOME={shlex.quote(str(prefix))}",
            'export PATH="$CUDA_HOME/bin:$PATH"',
            f'export LD_LIBRARY_PATH="$CUDA_HOME/{libdir}'
            '${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"',
        ]
    return atomic_write_text(path, "\n".join(lines) + "\n", shared=True)
