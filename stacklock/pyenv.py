"""The PEP 508 marker environment of another python, asked of it: the code it
runs (standard library only, so any venv can run it), shared by install's
interpreter probe and validate, which both need what that python's markers are."""

from __future__ import annotations

__all__ = ["MARKER_ENV_CODE", "marker_env_code"]

MARKER_ENV_CODE = r"""
import json, os, platform, sys
iver = sys.implementation.version
env = {
    "implementation_name": sys.implementation.name,
    "implementation_version": f"{iver.major}.{iver.minor}.{iver.micro}",
    "os_name": os.name, "platform_machine": platform.machine(),
    "platform_release": platform.release(), "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
"""


def marker_env_code(then: str) -> str:
    """``python -c`` code that builds ``env`` and then runs ``then``."""
    return MARKER_ENV_CODE + then
