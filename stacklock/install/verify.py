"""The new generation checked before it is swapped in: a generation that a full
disk, a killed uv or a bug left incomplete must never replace a working one.

The check reads files, no interpreter start: ``pyvenv.cfg`` and ``bin/python``
exist, and every package of the plan has a ``*.dist-info`` with its version and a
METADATA file (uv writes METADATA last but one, RECORD last). A failure names what
is missing; a disk that is (nearly) full is named as the cause.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.errors import InstallError, NoSpaceError
from stacklock.words import counted, first

if TYPE_CHECKING:
    from pathlib import Path

    from stacklock.install.plan import InstallPlan

__all__ = ["LOW_SPACE", "check_generation", "out_of_space"]

LOW_SPACE = 16 << 20  # bytes free below which a failed step is blamed on the disk


def _installed(generation: Path) -> dict[str, set[Version]]:
    found: dict[str, set[Version]] = {}
    for site in generation.glob("lib/python*/site-packages"):
        for entry in site.glob("*.dist-info"):
            name, _, version = entry.name.removesuffix(".dist-info").partition("-")
            if not (entry / "METADATA").is_file() or not (entry / "RECORD").is_file():
                continue  # half-written: as good as absent
            try:
                found.setdefault(canonicalize_name(name), set()).add(Version(version))
            except InvalidVersion:
                continue
    return found


def check_generation(plan: InstallPlan) -> None:
    """Raise InstallError unless generation ``plan.generation`` holds a venv
    with every package of the plan at its version (any version for a vcs or
    directory source the lock gives none: PEP 751 leaves it out)."""
    gen = plan.generation_dir
    python = gen / "bin" / "python"
    if not (gen / "pyvenv.cfg").is_file() or not os.access(python, os.X_OK):
        raise _incomplete(plan, "it is not a virtual environment (no pyvenv.cfg "
                                "or bin/python)")
    installed = _installed(gen)
    missing = []
    for name, version in plan.packages:
        versions = installed.get(canonicalize_name(name), set())
        if (Version(version) not in versions) if version else not versions:
            found = ", ".join(sorted(str(v) for v in versions)) or "absent"
            missing.append(f"{name} {version} ({found})")
    if missing:
        raise _incomplete(plan, f"{counted(len(missing), 'locked package')} "
                          f"missing: {first(missing, 5)}")


def _incomplete(plan: InstallPlan, what: str) -> InstallError:
    cause = out_of_space(plan.generation_dir)
    if cause is not None:
        return cause
    return InstallError(
        f"the new environment {plan.generation_dir} is incomplete: {what}; "
        f"{plan.venv} was left as it was",
        hint="run the install again; the logs under the cache's logs/ say more")


def out_of_space(path: Path) -> NoSpaceError | None:
    """A NoSpaceError (exit 1) naming the file system of ``path`` when it has
    (almost) no space left, else None."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return None
    if free >= LOW_SPACE:
        return None
    return NoSpaceError(
        f"no space left on the file system of {probe} ({free >> 10} KiB free); the "
        "new environment was removed and the old one left as it was",
        hint="free space there (or install into another --venv), then run the "
             "install again")
