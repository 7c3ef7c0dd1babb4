"""Symbol families: which package a symbol belongs to, by its name.

A C++ symbol's family is its top namespace (``c++:c10`` for
``_ZN3c104cuda9SetDeviceEi``), a C symbol's its prefix (``c:aoti`` for
``aoti_torch_get_device``). A wheel owns the families its libraries export:
every C++ namespace, and a C prefix once it names ten exports or more. The
check judges a missing symbol only where its family is owned by a package the
object links (:mod:`stacklock.native.check`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["owned_families", "symbol_family", "top_namespace"]

# _ZN3c104cuda9SetDeviceEi, _ZNK2at6Tensor..., _ZTVN5torch8autograd4NodeE:
# optional vtable/typeinfo/guard prefix, N, cv/ref qualifiers, <length><name>
# (six digits at most: int() refuses over 4,300, a crafted export may have them).
_NESTED = re.compile(r"_Z(?:T[VISTHW]|GV)?N[rVKRO]*([1-9][0-9]{0,5})")


def top_namespace(symbol: str) -> str | None:
    """``c10`` for ``_ZN3c104cuda9SetDeviceEi``; None for C names, ``std::``
    (a substitution, not a name) and functions outside any namespace."""
    match = _NESTED.match(symbol)
    if match is None:
        return None
    start = match.end()
    return symbol[start : start + int(match.group(1))] or None


_C_FAMILY = re.compile(r"([A-Za-z][A-Za-z0-9]+)_[A-Za-z0-9_]+")
_MIN_C_FAMILY = 10  # exports with a C prefix before a package is said to own it


@functools.cache  # asked for every symbol of every object, most of them again
def symbol_family(symbol: str) -> str | None:
    """``c++:c10`` for ``_ZN3c104cuda9SetDeviceEi``, ``c:aoti`` for
    ``aoti_torch_get_device``; None for ``std::``, ``memcpy``, ``_Py...``."""
    if symbol.startswith("_Z"):
        space = top_namespace(symbol)
        return f"c++:{space}" if space and not space.startswith("_") else None
    match = _C_FAMILY.fullmatch(symbol)
    return f"c:{match.group(1)}" if match else None


# the same two readings over a wheel's exports joined by NUL (a name holds none),
# in one pass of each pattern: asking symbol_family of each of torch's 100,000
# exports took 0.05-0.1 s of a resolve, each time a wheel's facts grew
_NESTED_ALL = re.compile("\0" + _NESTED.pattern + "([^\0]*)")
_C_FAMILY_ALL = re.compile("\0" + _C_FAMILY.pattern + "(?=\0)")


def owned_families(exports: Iterable[str]) -> frozenset[str]:
    """The families of ``exports`` (:func:`symbol_family`) that a wheel
    exporting them owns: every C++ one, a C one with ten exports or more."""
    text = "\0" + "\0".join(exports) + "\0"
    spaces = {rest[:int(length)] for length, rest in _NESTED_ALL.findall(text)}
    owned = {f"c++:{space}" for space in spaces if space and not space.startswith("_")}
    counts = Counter(_C_FAMILY_ALL.findall(text))
    owned.update(f"c:{prefix}" for prefix, n in counts.items() if n >= _MIN_C_FAMILY)
    return frozenset(owned)
