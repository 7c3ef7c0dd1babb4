"""An :class:`~stacklock.install.plan.Interpreter` for a python that is not here:
the CPython of a :class:`~stacklock.target.Target` (its markers and tags), so a
plan can be checked for 3.12 and 3.13 on a host that has neither."""

from __future__ import annotations

from stacklock.install.selection import Interpreter
from stacklock.target import Target


def target_interpreter(python: str, *, manylinux: str = "2_28") -> Interpreter:
    target = Target(python=python, platform="linux_x86_64", manylinux=manylinux)
    env = target.marker_environment()
    return Interpreter(path=f"/opt/python{python}/bin/python", version=env[
        "python_full_version"], machine="x86_64", glibc=target.glibc,
        marker_env=env, tags=tuple(target.tags()))
