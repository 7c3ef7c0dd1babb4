"""Where the uv that ships with stacklock (the ``uv`` dependency) is.

A module of its own, loading nothing: install's head start asks before anything
else is imported, and ``uv.find_uv_bin`` loads sysconfig (~9 ms here) to look
first where this check looks without it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["find_uv"]


def find_uv() -> str:
    """The ``uv`` in this interpreter's scripts folder (``<prefix>/bin``, the
    first place ``uv.find_uv_bin`` looks), else wherever that finds it."""
    here = os.path.join(sys.prefix, "bin", "uv")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    from uv import find_uv_bin

    return str(find_uv_bin())
