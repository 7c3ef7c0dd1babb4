"""C++ symbol names as people read them, by GNU ``c++filt``.

``c++filt`` (binutils) is the reference Itanium demangler and is on every machine
that has a compiler; one process demangles a batch of names given as arguments.
Where it is missing, names are shown mangled: a finding stays exact, only less
readable. ``validate``'s import diagnosis uses the same function.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from stacklock.runner import SubprocessRunner

if TYPE_CHECKING:
    from collections.abc import Iterable

    from stacklock.runner import Runner

__all__ = ["demangle"]

_BATCH = 500  # names per c++filt process, far below any argument-length limit


def demangle(symbols: Iterable[str], *, runner: Runner | None = None) -> dict[str, str]:
    """Mangled name -> demangled name, for the ``_Z`` names ``c++filt`` reads."""
    mangled = sorted({s for s in symbols if s.startswith("_Z")})
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return {}
    run = runner or SubprocessRunner()
    out: dict[str, str] = {}
    for start in range(0, len(mangled), _BATCH):
        batch = mangled[start : start + _BATCH]
        rc, text = run.capture([tool, *batch])
        lines = text.splitlines()
        if rc != 0 or len(lines) != len(batch):
            continue
        out.update((m, d) for m, d in zip(batch, lines, strict=True) if d != m)
    return out
