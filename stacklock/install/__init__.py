"""``stacklock install``: put a lock on this machine, safely.

The steps, in order, so that any failure (or a kill) before the last one leaves the
machine as it was (:func:`~stacklock.install.run.install_lock`):

1. **read** the lock once (:mod:`~stacklock.install.read`);
2. **plan** and **preflight**: ask the interpreter, decide every download and
   command, check target, driver, disk and access (:mod:`~stacklock.install.plan`,
   :mod:`~stacklock.install.preflight`); a dry run stops here;
3. snapshot the current venv, **fetch** what only stacklock fetches (the
   runfile, sdists) into the store (:mod:`~stacklock.install.fetch`); uv
   downloads the wheels itself, hash-checked;
4. **build** the new venv generation beside the old one
   (:mod:`~stacklock.install.venv`, :mod:`~stacklock.install.layout`), run the
   runfile into a new prefix (**toolkit**, :mod:`~stacklock.install.toolkit`);
5. **activate**: the activation file, swap the venv symlink (atomic),
   ``/usr/local/cuda`` only if asked;
6. **validate** the installed stack against the same lock (:mod:`stacklock.validate`).

The command line gives step 4's uv a head start (:mod:`~stacklock.install.early`):
uv builds the generation while steps 1-3 run, and is adopted only if the plan
runs exactly what it started. The names below load on first use, so that the
head start can begin before the rest of install is imported.
"""

from __future__ import annotations

from stacklock._lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: the head start must not wait for it

if TYPE_CHECKING:
    from stacklock.install.render import render_install, render_rollback
    from stacklock.install.run import (
        DEFAULT_CUDA_LINK,
        InstallResult,
        RollbackResult,
        install_lock,
        rollback_install,
    )

__all__ = [
    "DEFAULT_CUDA_LINK",
    "InstallResult",
    "RollbackResult",
    "install_lock",
    "render_install",
    "render_rollback",
    "rollback_install",
]

__getattr__ = lazy_exports(__name__, {
    "DEFAULT_CUDA_LINK": "run",
    "InstallResult": "run",
    "RollbackResult": "run",
    "install_lock": "run",
    "rollback_install": "run",
    "render_install": "render",
    "render_rollback": "render",
})
