"""C++ symbol names as people read them, by GNU ``c++filt``.

``c++filt`` (binutils) is the reference Itanium demangler and is on every machine
that has a compiler; one process demangles a whole batch. Where it is missing the
mangled names are shown as they are: a finding stays exact, only less readable.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["demangle"]


def demangle(symbols: Iterable[str]) -> dict[str, str]:
    """Mangled name -> demangled name, for the ``_Z`` names ``c++filt`` reads."""
    mangled = sorted({s for s in symbols if s.startswith("_Z")})
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return {}
    try:
        proc = subprocess.run(
            [tool], input="\n".join(mangled) + "\n", capture_output=True,
            text=True, check=False, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(mangled):
        return {}
    return {m: d for m, d in zip(mangled, lines, strict=True) if d != m}
