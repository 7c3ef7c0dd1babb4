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

The install command gives step 4's uv a head start (:mod:`~stacklock.install.early`):
uv builds the generation while steps 1-3 run, and is adopted only if the plan
runs exactly what it started.

``install_lock`` and ``rollback_install`` live in :mod:`~stacklock.install.run`,
their text renderings in :mod:`~stacklock.install.render`. Import from the
module that defines a name: this package imports nothing.
"""
