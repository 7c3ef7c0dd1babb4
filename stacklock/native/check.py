"""Does every shared object find what it needs in the lock? Pure: no I/O.

A shared object needs each of its ``DT_NEEDED`` sonames: the loader finds it among
the files the locked wheels put on disk, in the manylinux system baseline of the
target, or among the driver's libraries. And it needs each strong undefined symbol
from some object in scope. Which object should define a symbol is not written in
the ELF file, so symbols are checked by family: a C++ symbol belongs to its
top namespace (``c10::``, ``at::``, ``torch::``), a C symbol to the prefix before its
first underscore (``aoti_torch_...``, ``torch_exception_...``: torch's stable C ABI).
When a locked package the object reaches through its ``DT_NEEDED`` chain exports
that family (a namespace at all, a C prefix at least ten times), the symbol must be
among that package's exports. That is the "undefined symbol" an extension built
against another torch fails with; ``std::``, the interpreter's ``Py*`` and families
no locked library exports are left to the system and are not judged.

What fails the check (``blocking``) is a mismatch between locked packages: a soname
the lock ships in another major version only (``libcudart.so.12`` against
``libcudart.so.13``), or a symbol the counterpart package does not export. Sonames
no locked wheel ships in any version are listed, not refused: the system is to
provide them (``libibverbs.so.1`` for an RDMA plugin, ``libtbb.so.12`` for numba's
optional TBB layer, FFmpeg for torchcodec), which a lock cannot see.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from stacklock.native.elf import SharedObject
    from stacklock.native.wheel import NativeWheel, WheelNatives

__all__ = ["Finding", "find_incompatibilities", "symbol_family", "top_namespace"]

# _ZN3c104cuda9SetDeviceEi, _ZNK2at6Tensor..., _ZTVN5torch8autograd4NodeE:
# optional vtable/typeinfo/guard prefix, N, cv/ref qualifiers, <length><name>.
_NESTED = re.compile(r"_Z(?:T[VISTHW]|GV)?N[rVKRO]*([1-9][0-9]*)")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """``object`` (a path in ``wheel``) needs ``missing`` (a soname, or a symbol:
    ``kind``), which the lock does not provide. ``counterpart`` is the locked
    package on the other side: the one shipping another version of the soname, or
    the one whose exports lack the symbol."""

    package: str
    version: str
    wheel: str
    object: str
    kind: str  # "soname" or "symbol"
    missing: str
    demangled: str | None = None
    counterpart: str | None = None
    counterpart_has: tuple[str, ...] = field(default=())
    blocking: bool = True  # False: a soname the system is to provide

    def describe(self) -> str:
        what = self.missing
        if self.demangled:
            what = f"{self.demangled} ({self.missing})"
        head = f"{self.package} {self.version}: {self.object} needs {what}"
        if self.kind == "soname":
            if self.counterpart:
                has = ", ".join(self.counterpart_has)
                return (f"{head}, which no locked wheel provides ({self.counterpart} "
                        f"ships {has}): lock a {self.package} built for it, or change "
                        f"{self.counterpart.split()[0]}")
            return (f"{head}, which no locked wheel, the manylinux baseline or the "
                    f"driver provides: the system must")
        return (f"{head}, which {self.counterpart} does not export: lock a "
                f"{self.package} built against {self.counterpart}, or the "
                f"{(self.counterpart or '').split()[0]} it was built for")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "package": self.package, "version": self.version, "wheel": self.wheel,
            "object": self.object, "kind": self.kind, "missing": self.missing,
        }
        if self.demangled:
            out["demangled"] = self.demangled
        if self.counterpart:
            out["counterpart"] = self.counterpart
            out["counterpart-has"] = list(self.counterpart_has)
        out["blocking"] = self.blocking
        return out


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


def symbol_family(symbol: str) -> str | None:
    """``c++:c10`` for ``_ZN3c104cuda9SetDeviceEi``, ``c:aoti`` for
    ``aoti_torch_get_device``; None for ``std::``, ``memcpy``, ``_Py...``."""
    if symbol.startswith("_Z"):
        space = top_namespace(symbol)
        return f"c++:{space}" if space and not space.startswith("_") else None
    match = _C_FAMILY.fullmatch(symbol)
    return f"c:{match.group(1)}" if match else None


def _owned_families(exports: Iterable[str]) -> frozenset[str]:
    counts: dict[str, int] = defaultdict(int)
    for symbol in exports:
        family = symbol_family(symbol)
        if family is not None:
            counts[family] += 1
    return frozenset(f for f, n in counts.items()
                     if f.startswith("c++:") or n >= _MIN_C_FAMILY)


def _stem(soname: str) -> str:
    """``libcudart`` for ``libcudart.so.12``."""
    return soname.split(".so", 1)[0]


def _major(soname: str) -> str:
    """``12`` for ``libcudart.so.12.8.90``; ``""`` for ``libc10.so``."""
    return soname.split(".so", 1)[1].lstrip(".").split(".")[0]


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@dataclass(kw_only=True)
class _Index:
    """Who provides what, across the lock."""

    files: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    objects: dict[str, list[tuple[int, SharedObject]]] = field(
        default_factory=lambda: defaultdict(list))
    exports: dict[int, frozenset[str]] = field(default_factory=dict)
    namespaces: dict[int, frozenset[str]] = field(default_factory=dict)


def _make_index(natives: Sequence[WheelNatives]) -> _Index:
    index = _Index()
    for at, wheel in enumerate(natives):
        names = {_basename(p) for p in wheel.files}
        names.update(o.soname for o in wheel.objects if o.soname)
        for name in names:
            index.files[name].append(at)
        for obj in wheel.objects:
            index.objects[_basename(obj.path)].append((at, obj))
            if obj.soname and obj.soname != _basename(obj.path):
                index.objects[obj.soname].append((at, obj))
    return index


def _exports(index: _Index, natives: Sequence[WheelNatives], at: int) -> frozenset[str]:
    if at not in index.exports:
        index.exports[at] = frozenset(
            s for o in natives[at].objects for s in o.exported)
        index.namespaces[at] = _owned_families(index.exports[at])
    return index.exports[at]


def _scope(index: _Index, home: int, obj: SharedObject) -> list[int]:
    """The wheels whose objects ``obj`` reaches through DT_NEEDED, own first."""
    seen_wheels = [home]
    seen: set[str] = set()
    todo = list(obj.needed)
    while todo:
        soname = todo.pop()
        if soname in seen:
            continue
        seen.add(soname)
        found = index.objects.get(soname, [])
        mine = [f for f in found if f[0] == home]
        for at, dep in mine or found[:1]:
            if at not in seen_wheels:
                seen_wheels.append(at)
            todo.extend(dep.needed)
    return seen_wheels


def find_incompatibilities(
    wheels: Sequence[NativeWheel],
    natives: Sequence[WheelNatives],
    *,
    baseline: Iterable[str],
    extra_sonames: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Every soname and symbol the lock's shared objects need and do not find.

    ``natives[i]`` belongs to ``wheels[i]``; ``extra_sonames`` maps sonames
    something other than a wheel provides (a toolkit) to what provides them."""
    index = _make_index(natives)
    present = set(baseline) | set(extra_sonames or {})
    found: list[Finding] = []
    for at, (wheel, wheel_natives) in enumerate(zip(wheels, natives, strict=True)):
        for obj in wheel_natives.objects:
            found.extend(_missing_sonames(index, wheels, wheel, obj, present))
            found.extend(_missing_symbols(index, wheels, natives, at, obj))
    return found



def _label(wheel: NativeWheel) -> str:
    return f"{wheel.package} {wheel.version}"


def _finding(wheel: NativeWheel, obj: SharedObject, **kw: Any) -> Finding:
    return Finding(package=canonicalize_name(wheel.package), version=wheel.version,
                   wheel=wheel.filename, object=obj.path, **kw)


def _missing_sonames(
    index: _Index, wheels: Sequence[NativeWheel], wheel: NativeWheel,
    obj: SharedObject, present: set[str],
) -> Iterable[Finding]:
    for soname in obj.needed:
        if soname in present or soname in index.files:
            continue
        stem, major = _stem(soname), _major(soname)
        others = sorted(  # the same library in another major version
            (_label(wheels[at]), name)
            for name, ats in index.files.items()
            if _stem(name) == stem and _major(name) != major
            for at in ats if wheels[at].filename != wheel.filename
        )
        counterpart = others[0][0] if others else None
        has = tuple(sorted({n for label, n in others if label == counterpart}))
        yield _finding(wheel, obj, kind="soname", missing=soname,
                       counterpart=counterpart, counterpart_has=has,
                       blocking=counterpart is not None)


def _missing_symbols(
    index: _Index, wheels: Sequence[NativeWheel], natives: Sequence[WheelNatives],
    at: int, obj: SharedObject,
) -> Iterable[Finding]:
    if not obj.undefined:
        return
    scope = _scope(index, at, obj)
    exported = set(_exports(index, natives, at))
    owners: dict[str, int] = {}  # families another package's libraries export
    for other in scope[1:]:
        exported |= _exports(index, natives, other)
        for space in index.namespaces[other]:
            owners.setdefault(space, other)
    for symbol in obj.undefined:
        if symbol in exported:
            continue
        owner = owners.get(symbol_family(symbol) or "")
        if owner is None:
            continue
        yield _finding(wheels[at], obj, kind="symbol", missing=symbol,
                       counterpart=_label(wheels[owner]))
