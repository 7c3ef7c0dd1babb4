"""Native compatibility of a lock, before anything is installed.

Every shared object in the locked wheels is read the way the dynamic loader sees
it (:mod:`.elf`), straight from the index by range requests and only as far as
needed (:mod:`.wheel`), and checked against what the lock provides (:mod:`.check`):
sonames other wheels ship or the target's manylinux baseline guarantees, and the
C++ symbols of the libraries it links. ``resolve`` refuses a lock with blocking
findings unless the profile's ``[check] allow`` names the package; ``stacklock
check LOCK`` runs the same check on a written lock.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from stacklock.errors import NativeCheckError
from stacklock.native.ahead import ReadAhead
from stacklock.native.baseline import baseline_sonames
from stacklock.native.check import (
    Finding,
    find_incompatibilities,
    large_members_needed,
)
from stacklock.native.demangle import demangle
from stacklock.native.imports import loaded_objects, module_name
from stacklock.native.sources import SourceReader
from stacklock.native.wheel import (
    NativeWheel,
    WheelNatives,
    WheelReader,
)
from stacklock.words import first

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = [
    "Finding",
    "NativeReport",
    "NativeWheel",
    "SourceReader",
    "WheelReader",
    "check_native",
    "judge_natives",
    "raise_for_findings",
    "shared_counts",
    "split_by_import",
    "summarize",
    "warning_line",
    "warning_records",
]

_SHOWN = 3  # symbols shown per shared object in a message


@dataclass(frozen=True, kw_only=True)
class NativeReport:
    """``findings`` block; ``allowed`` would, but the profile allows their
    package; ``notes`` are sonames the system is to provide; ``unloaded`` are
    findings of run-time alternatives this lock never loads; ``warnings``
    would block, but their objects are loaded by no import of their package's
    top-level modules nor of ``[validate] imports`` (:mod:`.imports`), so they
    break only a module nobody imports (all of them block with ``strict``)."""

    wheels: int
    objects: int
    findings: tuple[Finding, ...]
    allowed: tuple[Finding, ...]
    notes: tuple[Finding, ...]
    allow: tuple[str, ...]
    bytes_read: int
    bytes_by_wheel: dict[str, int] = field(default_factory=dict)
    unloaded: tuple[Finding, ...] = ()
    unread: tuple[str, ...] = ()  # "package version: path" of large members
    requests: int = 0  # range requests the reads took
    # wheels with shared objects not read: no finding can join them to another
    # wheel (check.link_plan)
    unlinked: int = 0
    seconds: float = 0.0  # wall time of the check's reads and judging
    shared: int = 0  # wheels whose facts came from STACKLOCK_NATIVE_FACTS
    shared_failures: tuple[str, ...] = ()  # entries that source could not give
    warnings: tuple[Finding, ...] = ()
    strict: bool = False  # [check] strict: warnings were not told apart

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "wheels": self.wheels,
            "objects": self.objects,
            "allow": list(self.allow),
            "findings": [f.to_dict() for f in self.findings],
            "warnings": [f.to_dict() for f in self.warnings],
            "strict": self.strict,
            "allowed": [f.to_dict() for f in self.allowed],
            "notes": [f.to_dict() for f in self.notes],
            "unloaded": [f.to_dict() for f in self.unloaded],
            "unread": list(self.unread),
            "bytes_read": self.bytes_read,
            "bytes_by_wheel": dict(sorted(self.bytes_by_wheel.items())),
            "requests": self.requests,
            "unlinked": self.unlinked,
            "seconds": round(self.seconds, 3),
            "facts_shared": self.shared,
            "facts_shared_failures": list(self.shared_failures),
        }


# threads reading wheels: the reads hold the interpreter's lock for most of their
# CPU (decoding, the ELF reader), so more threads mostly add the cost of handing
# it over. The cold check of pypi-cu130's lock, 5 alternating runs each: 2.85 s
# of CPU with 3 against 3.14 s with 8 (2.41 against 2.51 s wall); 1 or 2 leave
# the network idle while one decodes
_READERS = 3


def check_native(
    wheels: Sequence[NativeWheel],
    *,
    reader: WheelReader,
    manylinux: str,
    platform: str,
    python: str,
    allow: Iterable[str] = (),
    threads: int = _READERS,
    on_wheel: Callable[[NativeWheel], None] | None = None,
    sources: SourceReader | None = None,
    imports: Sequence[str] = (),
    strict: bool = False,
) -> NativeReport:
    """Read the wheels of ``wheels`` through ``reader`` and check them. A wheel
    is judged by what it holds, not by its tag: ``py3-none-any`` wheels carry
    native libraries too (bitsandbytes 0.39.0), and their central directory
    (usually seen by the resolve already) says whether they do. Its shared
    objects are read only when a finding could join it to another wheel
    (:func:`~stacklock.native.check.link_plan`).

    ``sources`` reads the Python sources of a package with blocking findings,
    to tell a finding that breaks an import of it from one in a module
    nobody imports (a warning; ``imports``: the profile's ``[validate]
    imports``, imported too); ``strict``, or no ``sources``: every finding
    blocks."""
    before, asked = reader.bytes_read, reader.requests
    hits, failed = shared_counts(reader)
    started = time.monotonic()
    ahead = ReadAhead(reader, threads=threads, speculative=False, on_read=on_wheel)
    try:
        for wheel in wheels:
            ahead.add(wheel)
        ahead.wait()
        files = [ahead.files[w.sha256.lower()] for w in wheels]
        # the large members the check needs over all wheels (a pair's were
        # asked as their reads ended)
        natives = [_facts(ahead, w, f) for w, f in zip(wheels, files, strict=True)]
        for at, paths in large_members_needed(wheels, natives).items():
            ahead.ask_large(wheels[at], paths)
        ahead.wait()
    finally:
        ahead.stop()  # nothing is left running, unless an error came first
    read_all = [_facts(ahead, w, f) for w, f in zip(wheels, files, strict=True)]
    kept = [(w, n) for w, n in zip(wheels, read_all, strict=True) if n.files]
    native = [w for w, _ in kept]
    report = judge_natives(native, [n for _, n in kept], manylinux=manylinux,
                           platform=platform, python=python, allow=allow)
    if strict:
        report = replace(report, strict=True)
    elif sources is not None and report.findings:
        report = split_by_import(report, kept, sources, imports)
    hits_now, failed_now = shared_counts(reader)
    return replace(
        report, unlinked=sum(bool(f) and w.sha256.lower() not in ahead.read
                             for w, f in zip(wheels, files, strict=True)),
        bytes_read=reader.bytes_read - before,
        requests=reader.requests - asked,
        bytes_by_wheel={w.filename: reader.bytes_by_wheel.get(w.filename, 0)
                        for w in wheels},
        seconds=time.monotonic() - started,
        shared=hits_now - hits,
        shared_failures=failed_now[len(failed):],
    )


def split_by_import(report: NativeReport,
                    wheels: Sequence[tuple[NativeWheel, WheelNatives]],
                    sources: SourceReader, imports: Sequence[str]) -> NativeReport:
    """``report`` with each blocking finding whose object no import of its
    package loads moved to ``warnings`` (:mod:`.imports`)."""
    by_package: dict[str, tuple[NativeWheel, WheelNatives]] = {
        canonicalize_name(w.package): (w, n) for w, n in wheels}
    loaded: dict[str, set[str] | None] = {}
    for package in sorted({f.package for f in report.findings}):
        found = by_package.get(package)
        facts = sources.facts(found[0]) if found is not None else None
        if found is None or facts is None:
            loaded[package] = None  # not known: every finding blocks
            continue
        objects = {o.path: o.needed for o in found[1].objects}
        ours = (*facts.top_level, *facts.modules)
        start = [*facts.top_level, *(m for m in imports if any(
            m == t or m.startswith(f"{t}.") for t in ours))]
        sonames = {o.soname: o.path for o in found[1].objects if o.soname}
        loaded[package] = loaded_objects(facts.modules, start, objects, sonames)
    keep: list[Finding] = []
    warn: list[Finding] = []
    for finding in report.findings:
        paths = loaded.get(finding.package)
        if paths is None or finding.object in paths:
            keep.append(finding)
        else:  # it no longer blocks, and says so (--json's blocking)
            warn.append(replace(finding, blocking=False))
    return replace(report, findings=tuple(keep), warnings=tuple(warn))


def shared_counts(reader: WheelReader) -> tuple[int, tuple[str, ...]]:
    """(entries used, failures) of the reader's shared facts source so far."""
    shared = reader.shared
    return (0, ()) if shared is None else (shared.hits, tuple(shared.failures))


def _facts(ahead: ReadAhead, wheel: NativeWheel,
           files: tuple[str, ...]) -> WheelNatives:
    """What ``ahead`` read of ``wheel``; a wheel it only listed, its files."""
    found = ahead.read.get(wheel.sha256.lower())
    return found if found is not None else WheelNatives(
        sha256=wheel.sha256.lower(), files=files, objects=())


def judge_natives(
    wheels: Sequence[NativeWheel],
    natives: Sequence[WheelNatives],
    *,
    manylinux: str,
    platform: str,
    python: str,
    allow: Iterable[str] = (),
) -> NativeReport:
    """The check of wheels already read (``natives[i]`` is ``wheels[i]``'s). Pure
    but for ``c++filt``, which names the symbols."""
    found = find_incompatibilities(
        wheels, natives,
        baseline=baseline_sonames(manylinux=manylinux, platform=platform,
                                  python=python),
    )
    names = demangle(f.missing for f in found if f.kind == "symbol")
    found = [replace(f, demangled=names.get(f.missing)) for f in found]
    allowed_names = {canonicalize_name(a) for a in allow}
    blocking = [f for f in found if f.blocking]
    return NativeReport(
        wheels=len(wheels),
        objects=sum(len(n.objects) for n in natives),
        findings=tuple(f for f in blocking if f.package not in allowed_names),
        allowed=tuple(f for f in blocking if f.package in allowed_names),
        notes=tuple(f for f in found if not f.blocking and not f.unloaded),
        unloaded=tuple(f for f in found if f.unloaded),
        unread=tuple(sorted(f"{w.package} {w.version}: {path}"
                            for w, n in zip(wheels, natives, strict=True)
                            for path in n.large)),
        allow=tuple(sorted(allowed_names)),
        bytes_read=0,
    )


def summarize(findings: Iterable[Finding]) -> list[str]:
    """One line per shared object: its missing sonames, its first symbols."""
    grouped: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for finding in findings:
        grouped[(finding.package, finding.object)].append(finding)
    lines: list[str] = []
    for (_package, _object), group in sorted(grouped.items()):
        sonames = [f for f in group if f.kind == "soname"]
        symbols = [f for f in group if f.kind == "symbol"]
        lines.extend(f.describe() for f in sonames)
        if symbols:
            line = symbols[0].describe()
            if len(symbols) > 1:
                also = [f.demangled or f.missing for f in symbols[1:]]
                line += f"; also {first(also, _SHOWN - 1)}"
            lines.append(line)
    return lines


def warning_records(findings: Iterable[Finding]) -> list[dict[str, str]]:
    """One record per module that will not import (a finding outside every
    import of its package), as the lock keeps it: package, version, module
    (``cupy_backends.cuda.libs.cudnn``, or the library's path) and reason
    (``needs libcudnn.so.8 (nvidia-cudnn-cu12 9.10.2.21 ships
    libcudnn.so.9)``)."""
    grouped: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        grouped[(f.package, f.version, f.object)].append(f)
    out = []
    for (package, version, path), group in sorted(grouped.items()):
        needs = ", ".join(dict.fromkeys(f.demangled or f.missing for f in group))
        first = group[0]
        why = (f" ({first.counterpart} ships {', '.join(first.counterpart_has)})"
               if first.kind == "soname" and first.counterpart else
               f" (not exported by {first.counterpart})" if first.counterpart
               else "")
        out.append({"package": package, "version": version,
                    "module": module_name(path) or path,
                    "reason": f"needs {needs}{why}"})
    return out


def warning_line(record: Mapping[str, str]) -> str:
    """``cupy_backends.cuda.libs.cudnn (cupy-cuda12x 13.4.1) will not import:
    needs ...``; a library that is no module "will not load"."""
    verb = "load" if "/" in record["module"] else "import"
    return (f"{record['module']} ({record['package']} {record['version']}) will "
            f"not {verb}: {record['reason']}")


def raise_for_findings(report: NativeReport) -> None:
    """:class:`NativeCheckError` (exit 1) when ``report`` has blocking findings."""
    if report.ok:
        return
    packages = sorted({f.package for f in report.findings})
    lines = summarize(report.findings)
    message = (f"{len(lines)} native incompatibilit"
               f"{'y' if len(lines) == 1 else 'ies'} in the lock:\n  "
               + "\n  ".join(lines))
    allow = ", ".join(f'"{p}"' for p in packages)
    raise NativeCheckError(
        message, findings=report.findings,
        hint=f"change the packages named, or after review add [check] allow = "
        f"[{allow}] to the profile",
    )
