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

Some wheels ship one library per runtime and load only the one that matches
(:func:`find_alternatives`): bitsandbytes one per CUDA version, torchcodec one per
FFmpeg major, torch-memory-saver ``_cu12``/``_cu13`` hooks, torch-c-dlpack-ext one
add-on per torch release. Such a family needs one alternative that loads; when its
variants are named for a locked package's version (``torch29``), only that version's
one is ever loaded, and none at all when the wheel has none for it. The others'
findings are kept as ``unloaded``, not blocking.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from stacklock.native.families import symbol_family, top_namespace

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping, Sequence

    from stacklock.native.elf import SharedObject
    from stacklock.native.wheel import NativeWheel, WheelNatives

__all__ = [
    "IF_NAMED",
    "READ",
    "SKIP",
    "Finding",
    "find_alternatives",
    "find_incompatibilities",
    "is_linkable",
    "large_members_needed",
    "link_marks",
    "link_plan",
    "link_plan_marked",
    "names_a_library_of",
    "symbol_family",
    "top_namespace",
]



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
    blocking: bool = True  # False: a soname the system is to provide, or unloaded
    unloaded: str | None = None  # why the object is never loaded in this lock

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

    def reason(self) -> str:
        """Why the package does not load, without the advice: for a lock."""
        what = self.demangled or self.missing
        if self.kind == "soname":
            has = ", ".join(self.counterpart_has)
            return f"{self.object} needs {what} ({self.counterpart} ships {has})"
        return f"{self.object} needs {what}, which {self.counterpart} does not export"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "package": self.package, "version": self.version, "wheel": self.wheel,
            "object": self.object, "kind": self.kind, "missing": self.missing,
        }
        if self.demangled:
            out["demangled"] = self.demangled
        if self.counterpart:
            out["counterpart"] = self.counterpart
            out["counterpart_has"] = list(self.counterpart_has)
        out["blocking"] = self.blocking
        if self.unloaded:
            out["unloaded"] = self.unloaded
        return out


# an extension module: the interpreter loads it by its tagged name
_EXTENSION_MODULE = re.compile(r"\.(?:cpython-[^/]*|pypy[^/]*|abi3)\.so$")
# a library auditwheel copied in: libgfortran-040039e1.so.5.0.0,
# libopenblasp-r0-8b9e111f.3.17.so, under <project>.libs/ (or .libs/)
_VENDORED = re.compile(r"(?:^|/)[^/]*\.libs/[^/]*-[0-9a-f]{8}\.[^/]*$")


def is_linkable(path: str) -> bool:
    """Whether another wheel's object can name ``path`` in DT_NEEDED: a library
    it ships for others (``torch/lib/libc10.so``, ``libcudart.so.13``), not an
    extension module (loaded by the interpreter under its tagged name) nor a
    library auditwheel copied in under a name made from its own hash (which
    only this wheel's objects name; another copy of the same file has the
    same name and the same bytes)."""
    return not (_EXTENSION_MODULE.search(path) or _VENDORED.search(path))


# what the check reads of a wheel (:func:`link_plan`)
READ = "read"  # its objects may name another wheel's library
IF_NAMED = "if named"  # only another wheel's objects may name its libraries
SKIP = "skip"  # no finding can join it to another wheel


def link_plan(files: Sequence[Sequence[str]]) -> list[str]:
    """What the check reads of each wheel (``files[i]``: wheel i's
    shared-object-like members). Every finding that fails the check joins two
    wheels through a ``DT_NEEDED`` entry: an object needs a library that another
    wheel ships in another major, or a symbol that a library of another wheel
    it links lacks. Both need a linkable library (:func:`is_linkable`) in the
    other wheel. So a wheel's objects are read (:data:`READ`) when another
    wheel ships one: they may name it. A wheel that ships linkable libraries
    while no other wheel does is read only when an object read elsewhere names
    one of them (:data:`IF_NAMED`, :func:`names_a_library_of`): pyarrow beside
    numpy, pandas and pillow, whose objects name none, is not read. A stack of
    self-contained wheels (numpy, scipy, pandas, each with its own copies)
    reads none (:data:`SKIP`)."""
    return link_plan_marked([link_marks(paths) for paths in files])


def link_marks(paths: Sequence[str]) -> tuple[bool, bool]:
    """(has shared objects, ships a linkable one) of a wheel's members."""
    return bool(paths), any(is_linkable(p) for p in paths)


def link_plan_marked(marks: Sequence[tuple[bool, bool]]) -> list[str]:
    """:func:`link_plan` of wheels known by their :func:`link_marks`."""
    linking = sum(link for _, link in marks)
    native = sum(has for has, _ in marks)
    return [READ if has and linking - link > 0
            else IF_NAMED if link and native - has > 0
            else SKIP for has, link in marks]


def names_a_library_of(natives: WheelNatives, files: Sequence[str]) -> bool:
    """Whether an object of ``natives`` names (``DT_NEEDED``) a linkable library
    among ``files``, in any major (``libarrow.so.2100`` for
    ``pyarrow/libarrow.so.2600``: a finding of its own)."""
    stems = {_stem(_basename(p)) for p in files if is_linkable(p)}
    return bool(stems) and any(_stem(name) in stems for obj in natives.objects
                               for name in obj.needed)


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
    # basename -> (wheel, path) of the large members not read (wheel.py)
    large: dict[str, list[tuple[int, str]]] = field(
        default_factory=lambda: defaultdict(list))


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
        for path in wheel.large:
            index.large[_basename(path)].append((at, path))
    return index


def _scope(index: _Index, home: int, obj: SharedObject) -> tuple[list[int], set[str]]:
    """The wheels whose objects ``obj`` reaches through DT_NEEDED, own first, and
    the sonames it reaches."""
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
    return seen_wheels, seen


def _is_cuda(name: str) -> bool:
    return "cuda" in name.lower()


def _may_provide(natives: Sequence[WheelNatives], wheels: Sequence[NativeWheel],
                 at: int, path: str, symbol: str) -> bool:
    """Could the unread large member ``path`` of wheel ``at`` export ``symbol``?
    Yes when the symbol's family is one its wheel's read objects own (``at::``
    beside libtorch_python) or it is named for the wheel's project
    (``torch_exception_get_what``, ``aoti_torch_get_device``), except that a
    library named for CUDA gives only symbols named for CUDA: every symbol an
    extension takes from torch's CUDA libraries alone is (``at::cuda::``,
    ``torch_cuda_stream_synchronize``; so in every extension recorded)."""
    if _is_cuda(path) and not _is_cuda(symbol):
        return False
    if (symbol_family(symbol) or "") in natives[at].families:
        return True
    project = canonicalize_name(wheels[at].package)
    return project in symbol.lower().split("_")[:2]


def large_members_needed(
    wheels: Sequence[NativeWheel], natives: Sequence[WheelNatives],
) -> dict[int, set[str]]:
    """The large members (wheel -> paths) the symbol check needs read: those an
    object of another wheel links directly while needing a symbol that nothing
    read exports and that they may provide (:func:`_may_provide`), except the
    ones named for CUDA: the symbols only they could give are left unjudged.
    cuDNN, cuBLAS, NCCL and libtorch_cuda stay unread for a CUDA 13 torch stack
    (3 GB); libtorch_cpu (120 MB) is read when an extension of torch is locked."""
    index = _make_index(natives)
    if not index.large:
        return {}
    wanted: dict[int, set[str]] = defaultdict(set)
    exported: Collection[frozenset[str] | set[str]] = ()  # made when first needed
    for at, wheel in enumerate(natives):
        for obj in wheel.objects:
            links = [index.large[n] for n in obj.needed if n in index.large]
            if not links:
                continue
            if not exported:  # a pair (asked as reads end): their own sets
                exported = [n.exports for n in natives] if len(natives) <= 2 else \
                    [set().union(*(n.exports for n in natives))]
            # what nothing read exports, by set operations (a Python loop
            # asking each set in turn for each undefined symbol: 0.1 s of a
            # CUDA 13 stack's resolve)
            absent = set(obj.undefined).difference(*exported)
            residue = [s for s in obj.undefined
                       if s in absent and symbol_family(s) is not None]
            for other, path in (m for members in links for m in members):
                if other != at and not _is_cuda(path) and any(
                        _may_provide(natives, wheels, other, path, s)
                        for s in residue):
                    wanted[other].add(path)
    return dict(wanted)


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
    versions: dict[str, str] = {canonicalize_name(w.package): w.version
                                for w in wheels}
    found: list[Finding] = []
    for at, (wheel, wheel_natives) in enumerate(zip(wheels, natives, strict=True)):
        mine: dict[str, list[Finding]] = defaultdict(list)
        for obj in wheel_natives.objects:
            mine[obj.path].extend(_missing_sonames(index, wheels, wheel, obj, present))
            mine[obj.path].extend(_missing_symbols(index, wheels, natives, at, obj))
        for family in find_alternatives(wheel_natives.objects, versions):
            _judge_family(family, mine, versions)
        found.extend(f for obj in wheel_natives.objects for f in mine[obj.path])
    return found


# A run-time alternative is told apart from its siblings by numbers in its path:
# libbitsandbytes_cuda121.so, torchcodec/libtorchcodec_core7.so,
# torch_memory_saver_hook_mode_torch_cu13.abi3.so, cuda/core/cu12/_device.*.so.
_EXTENSION = re.compile(
    r"(?:\.(?:cpython|pypy)[-\w]*|\.abi3)?\.so(?:\.[0-9][0-9A-Za-z.]*)?$")
_DIGITS = re.compile(r"[0-9]+")
_TOKEN = re.compile(r"([._-]?)([A-Za-z]*)#")  # the variant token of a pattern


@dataclass(frozen=True, kw_only=True)
class Family:
    """Objects of one wheel of which the wheel loads one at run time.
    ``variants`` maps a variant ("13", "2.9", "" for an unnumbered default) to
    its objects' paths; ``selector`` is the word before the number ("cu",
    "torch")."""

    pattern: str
    selector: str
    variants: Mapping[str, tuple[str, ...]]


def _pattern(path: str) -> str:
    return _DIGITS.sub("#", _EXTENSION.sub("", path))


def find_alternatives(objects: Sequence[SharedObject],
                      packages: Collection[str] = ()) -> list[Family]:
    """The families of run-time alternatives among one wheel's shared objects.

    Objects whose paths differ only in one number (``..._cu12`` and ``..._cu13``)
    form a family, joined by an unnumbered sibling (``...hook_mode_torch`` beside
    ``..._torch_cu12``, a build for another runtime), when the number names a
    version of a locked package (``torch29``, ``packages``) or the variants link
    another major of one library (``libcudart.so.12`` and ``.so.13``,
    ``libavutil.so.58`` and ``.so.59``): builds for different runtimes, not
    modules that are all imported (``_SHA256`` and ``_SHA512``). A member that an
    object outside every family links (DT_NEEDED) is loaded whenever that one
    is, so it is no alternative: its family is dropped."""
    grouped: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for obj in objects:
        stem = _EXTENSION.sub("", obj.path)
        grouped[_pattern(obj.path)][".".join(_DIGITS.findall(stem))].append(obj.path)
    families = {p: v for p, v in grouped.items()
                if len(v) > 1 and len(_TOKEN.findall(p)) == 1}
    for pattern, variants in families.items():
        plain = grouped.get(_TOKEN.sub("", pattern))
        if plain is not None and list(plain) == [""]:
            variants[""].extend(plain[""])
    by_path = {o.path: o for o in objects}
    families = {p: v for p, v in families.items()
                if canonicalize_name(_TOKEN.findall(p)[0][1]) in packages
                or _links_other_majors(v.values(), by_path)}
    members = {path for v in families.values() for paths in v.values()
               for path in paths}
    linked = {name for obj in objects if obj.path not in members
              for name in obj.needed}
    out = []
    for pattern, variants in sorted(families.items()):
        paths = {p for ps in variants.values() for p in ps}
        if any(_basename(p) in linked for p in paths) or any(
                o.soname in linked for o in objects if o.path in paths and o.soname):
            continue
        out.append(Family(pattern=pattern, selector=_TOKEN.findall(pattern)[0][1],
                          variants={k: tuple(sorted(v))
                                    for k, v in sorted(variants.items())}))
    return out


def _links_other_majors(variants: Iterable[list[str]],
                        by_path: Mapping[str, SharedObject]) -> bool:
    majors: dict[str, set[str]] = defaultdict(set)
    for paths in variants:
        for soname in {n for p in paths for n in by_path[p].needed}:
            majors[_stem(soname)].add(_major(soname))
    return any(len(m) > 1 for m in majors.values())


def _selected(family: Family, versions: Mapping[str, str]) -> str | None:
    """The variant a family named for a locked package's version loads ("" for
    none); None when the family is not named for a locked package."""
    locked = versions.get(canonicalize_name(family.selector)) if family.selector \
        else None
    if locked is None:
        return None
    major_minor = "".join(_DIGITS.findall(locked)[:2])  # "29" for 2.9.1
    return major_minor if major_minor in family.variants else ""


def _judge_family(family: Family, found: dict[str, list[Finding]],
                  versions: Mapping[str, str]) -> None:
    """Mark the findings of the alternatives that are not loaded as such."""

    def fails(variant: str) -> bool:
        return any(f.blocking for p in family.variants[variant] for f in found[p])

    selected = _selected(family, versions)
    if selected is not None:
        name = f"{family.selector} {versions[canonicalize_name(family.selector)]}"
        loaded = [selected] if selected else []
        why = (f"a build for another {family.selector}; the wheel loads the one "
               f"for {name}" if selected else
               f"the wheel has no build for {name} and loads none")
    else:
        loaded = [v for v in family.variants if not fails(v)][:1]
        if not loaded:
            return  # no alternative loads: every finding stands
        chosen = family.variants[loaded[0]][0]
        why = f"a run-time alternative of {chosen}, which loads"
    for variant, paths in family.variants.items():
        if variant in loaded:
            continue
        for path in paths:
            found[path] = [replace(f, blocking=False, unloaded=why) if f.blocking
                           else f for f in found[path]]



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
    scope, reached = _scope(index, at, obj)
    unread = [m for name in reached for m in index.large.get(name, ())]
    exported = [natives[w].exports for w in scope]  # not copied: 100k
    absent = set(obj.undefined).difference(*exported)
    missing = [symbol for symbol in obj.undefined if symbol in absent] \
        if absent else []
    if not missing:
        return
    owners: dict[str, int] = {}  # families another package's libraries export
    for other in scope[1:]:
        # worked out once per wheel, and only here: when a symbol is missing
        for space in natives[other].families:
            owners.setdefault(space, other)
    for symbol in missing:
        owner = owners.get(symbol_family(symbol) or "")
        if owner is None or any(_may_provide(natives, wheels, other, path, symbol)
                                for other, path in unread):
            continue  # not judged, or it may be in a library not read
        yield _finding(wheels[at], obj, kind="symbol", missing=symbol,
                       counterpart=_label(wheels[owner]))
