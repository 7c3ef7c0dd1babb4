"""Locking a profile (``stacklock resolve``): resolve it, then write the lock."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from stacklock._fs import cache_dir as default_cache_dir
from stacklock._fs import check_writable, publish_bytes
from stacklock.metadata.listings import Listings
from stacklock.profile import default_lock_path, load_profile
from stacklock.resolve.memo import headline, memo_key, store_record
from stacklock.resolve.preferences import load_preferences
from stacklock.resolve.resolution import Resolution, client_for, resolve_profile
from stacklock.resolve.result import PassedOver

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import httpx
    from packaging.utils import NormalizedName
    from packaging.version import Version

    from stacklock.native import Finding, NativeReport, NativeWheel
    from stacklock.native.ahead import ReadAhead
    from stacklock.profile import Profile
    from stacklock.resolve.hashes import LockedWheel
    from stacklock.resolve.result import ResolvedPackage

__all__ = [
    "ResolveResult",
    "check_resolution",
    "lock_profile",
    "render_native",
    "render_resolve",
]


@dataclass(frozen=True, kw_only=True)
class ResolveResult:
    lock: Path
    resolution: Resolution
    seconds: float
    native: NativeReport | None = None  # None: the check was not asked for
    text: str = ""  # the lock's text
    written: bool = True  # False: the file there already held it, or not asked
    patch_lines: tuple[str, ...] = ()  # the profile's [[patches]], as applied

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "lock": str(self.lock), "packages": len(self.resolution.packages),
            "seconds": round(self.seconds, 3), "replayed": False}
        if self.native is not None:
            out["native"] = self.native.to_dict()
        return out


def lock_profile(
    profile: str,
    *,
    output: str | Path | None = None,
    index_urls: Mapping[str, str] | None = None,
    offline: bool = False,
    refresh: bool = False,
    cache_dir: Path | None = None,
    http: httpx.Client | None = None,
    on_status: Callable[[str], None] | None = None,
    on_download: Callable[[str, int, int | None], None] | None = None,
    check: bool = True,
    upgrade: bool = False,
    upgrade_packages: Sequence[str] = (),
    write: bool = True,
) -> ResolveResult:
    """Resolve ``profile`` (a built-in name or a path) and write its lock; on a
    ResolutionError nothing is written and an old lock stays as it was.

    The lock already at the output path is where the resolution starts: its
    versions and files are kept while the profile allows them
    (:mod:`stacklock.resolve.preferences`); ``upgrade`` ignores it,
    ``upgrade_packages`` releases those projects. ``write=False`` only says
    what would be written (``resolve --check``).

    ``check`` makes the native check (:mod:`stacklock.native`) a constraint of
    the resolution (:class:`NativeGate`): a candidate with blocking findings the
    profile's ``[check] allow`` does not name is passed over; when no
    combination is left, NativeCheckError (exit 1), and nothing is written."""
    started = time.monotonic()
    loaded = load_profile(profile)
    if index_urls:
        loaded = loaded.with_index_urls(dict(index_urls))
    path = Path(output) if output is not None else default_lock_path(loaded.name)
    if write:
        check_writable(path, example=f"pylock.{loaded.name}.toml")  # before the work
    preferences = load_preferences(path, upgrade=upgrade,
                                   upgrade_packages=upgrade_packages)
    with contextlib.ExitStack() as stack:
        client = http or stack.enter_context(client_for(loaded))
        gate = NativeGate(loaded, http=client, offline=offline,
                          cache_dir=cache_dir, on_status=on_status) if check else None
        if gate is not None:
            stack.callback(gate.stop)  # reads ahead of a failed resolution too
        # the central directories METADATA reads hold whole, for the check
        listings = gate.listings if gate is not None else None
        resolution = resolve_profile(loaded, http=client, offline=offline,
                                     refresh=refresh, cache_dir=cache_dir,
                                     preferences=preferences, on_status=on_status,
                                     on_download=on_download, gate=gate,
                                     listings=listings)
        native = gate.report if gate is not None else None
        if gate is not None and gate.warnings:
            resolution = replace(resolution, native_warnings=tuple(gate.warnings))
        if native is not None:
            from stacklock.native import raise_for_findings

            raise_for_findings(native)  # a finding no candidate change could fix
        patch_lines: tuple[str, ...] = ()
        if loaded.patches:  # a profile without patches pays nothing here
            from stacklock.resolve.patching import apply_declared
            from stacklock.store import ArtifactStore

            root = cache_dir or default_cache_dir()
            patched = apply_declared(
                resolution, lock=path, http=client, offline=offline,
                store=ArtifactStore(root / "artifacts"), cache=root)
            resolution, patch_lines = patched.resolution, patched.lines
    from stacklock.lock.write import render_lock
    from stacklock.resolve.lockfile import make_lock

    text = render_lock(make_lock(resolution, path=path))
    data = text.encode("utf-8")
    written = write and _read_or_none(path) != data  # an unchanged file stays
    if written:
        publish_bytes(path, data, what="the lock")
    result = ResolveResult(lock=path, resolution=resolution,
                           seconds=time.monotonic() - started, native=native,
                           text=text, written=written, patch_lines=patch_lines)
    key = memo_key(loaded, output=path, check=check, upgrade=upgrade,
                   released=preferences.released)
    if key is not None:
        store_record(cache_dir or default_cache_dir(), key,
                     pages=resolution.pages_read, lock_text=text,
                     packages=len(resolution.packages),
                     lines=render_resolve(result).split("\n")[1:],
                     native=native.to_dict() if native is not None else None,
                     seed=preferences.seed)
    return result


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


# reads ahead of the resolver at once: the resolution's own requests keep
# the rest of the client's connections (http.MAX_CONNECTIONS)
_AHEAD_THREADS = 4


class NativeGate:
    """The native check as a constraint of the resolution: called with each
    complete candidate set, it returns the candidates that would not load (a
    blocking finding the profile's ``[check] allow`` does not name), which the
    resolver passes over. ``report`` is the check of the last set.
    ``listings`` are for the resolution's METADATA reads to fill: the central
    directories they held whole, which the check then does not ask for.

    The check's reads start while the resolver works: each pinned candidate's
    wheel joins a :class:`~stacklock.native.ahead.ReadAhead`, which reads what
    the check of the candidates pinned so far would read. When the set is
    complete the reads not started are dropped and the check reads the set it
    is given (finding most of it read); :meth:`stop` ends what is left."""

    def __init__(self, profile: Profile, *, http: httpx.Client, offline: bool,
                 cache_dir: Path | None,
                 on_status: Callable[[str], None] | None = None) -> None:
        from stacklock.native import (
            SourceReader,
            WheelReader,  # ELF readers
        )
        from stacklock.native.elf import SHARED_OBJECT_MARK, is_shared_object_name

        self._profile = profile
        self.listings = Listings(keep=is_shared_object_name,
                                 contains=SHARED_OBJECT_MARK)
        self._reader = WheelReader(http, cache_dir=cache_dir or default_cache_dir(),
                                   offline=offline, listings=self.listings)
        self._sources = SourceReader(http, cache_dir=cache_dir or default_cache_dir(),
                                     offline=offline)
        # a warning (a module nobody imports would not load) passes its
        # candidate over too, until no combination is left without one
        self._warnings_pass_over = not profile.check.strict
        self._passed_for_warnings = False
        self._on_status = on_status
        self.report: NativeReport | None = None
        self._seconds = 0.0  # every round's, a passed-over candidate's included
        self._ahead: ReadAhead | None = None  # this round's reads
        self._checked: dict[str, NativeWheel] = {}  # the last set's, by name
        # every wheel judged, in a set or beside a consumer, by sha256: what
        # scripts/record_native.py records for a test to replay the resolve
        self.judged: dict[str, NativeWheel] = {}

    def pinned(self, name: NormalizedName, version: Version,
               wheel: LockedWheel) -> None:
        """Start the reads the check of ``wheel`` with the rest may need."""
        from stacklock.native import NativeWheel
        from stacklock.native.ahead import ReadAhead

        if self._ahead is None:
            self._ahead = ReadAhead(self._reader, threads=_AHEAD_THREADS,
                                    speculative=True)
        self._ahead.add(NativeWheel(package=name, version=str(version),
                                    filename=wheel.filename, url=wheel.url,
                                    sha256=wheel.sha256, size=wheel.size))

    def stop(self) -> None:
        """End the reads started ahead; returns at once."""
        if self._ahead is not None:
            self._ahead.stop()
            self._ahead = None

    def __call__(self, packages: Sequence[ResolvedPackage]) -> list[PassedOver]:
        from stacklock.native import NativeWheel, check_native, shared_counts

        if self._ahead is not None:  # running reads go on: the check waits
            self._ahead.drain()      # for them instead of reading again
            self._ahead = None
        wheels = [
            NativeWheel(package=p.name, version=str(p.version),
                        filename=p.wheel.filename, url=p.wheel.url,
                        sha256=p.wheel.sha256, size=p.wheel.size)
            for p in packages if not p.is_sdist and p.wheel is not None
            and (p.direct is None or p.direct.ref.url is not None)
        ]
        self._checked = {canonicalize_name(w.package): w for w in wheels}
        self.judged.update((w.sha256, w) for w in wheels)
        target = self._profile.target
        done: list[str] = []

        def on_wheel(wheel: NativeWheel) -> None:
            done.append(wheel.filename)
            if self._on_status is not None:
                self._on_status(f"native check: {len(done)} wheels read")

        report = check_native(
            wheels, reader=self._reader, manylinux=target.manylinux,
            platform=target.platform, python=target.python,
            allow=self._profile.check.allow, on_wheel=on_wheel,
            sources=self._sources, strict=self._profile.check.strict,
            imports=tuple(self._profile.validate.get("imports", ())))
        # bytes and time of every round, a passed-over candidate's included
        self._seconds += report.seconds
        shared, failures = shared_counts(self._reader)
        self.report = replace(report, bytes_read=self._reader.bytes_read,
                              requests=self._reader.requests, seconds=self._seconds,
                              shared=shared, shared_failures=failures)
        versions: dict[str, Version] = {p.name: p.version for p in packages}
        found: dict[str, list[Finding]] = {}
        for finding in report.findings:  # finding.package is canonical
            found.setdefault(finding.package, []).append(finding)
        if self._warnings_pass_over:
            for finding in report.warnings:
                found.setdefault(finding.package, []).append(finding)
            self._passed_for_warnings |= any(
                f.package not in {b.package for b in report.findings}
                for f in report.warnings)
        return [PassedOver(name=canonicalize_name(name), version=versions[name],
                           reason=these[0].reason(), findings=tuple(these))
                for name, these in sorted(found.items()) if name in versions]

    def lacks(self, consumer: NormalizedName, provider: NormalizedName,
              version: Version, wheel: LockedWheel) -> frozenset[str]:
        """The symbols ``consumer`` (its wheel in the last set checked) needs
        from the families ``provider`` owns that ``provider`` ``version``
        (``wheel``) does not export: the check of the two wheels alone
        (:mod:`stacklock.resolve.moves`; each read once per machine, the
        bytes and time counted in ``report``)."""
        from stacklock.native import NativeWheel, check_native

        target = self._profile.target
        pair = [self._checked[consumer],
                NativeWheel(package=provider, version=str(version),
                            filename=wheel.filename, url=wheel.url,
                            sha256=wheel.sha256, size=wheel.size)]
        self.judged.update((w.sha256, w) for w in pair)
        report = check_native(pair, reader=self._reader, manylinux=target.manylinux,
                              platform=target.platform, python=target.python,
                              strict=True)
        self._seconds += report.seconds
        return frozenset(
            f.missing for f in report.findings
            if f.package == consumer and f.kind == "symbol" and f.counterpart
            and canonicalize_name(f.counterpart.rsplit(" ", 1)[0]) == provider)

    def accept_warnings(self) -> bool:
        """No combination was left without a warning: from now on a warning
        passes nothing over. Whether that changes anything (a candidate was
        passed over for warnings alone)."""
        changed = self._warnings_pass_over and self._passed_for_warnings
        self._warnings_pass_over = False
        return changed

    @property
    def warnings(self) -> list[dict[str, str]]:
        """The last check's warnings, as the lock records them."""
        from stacklock.native import warning_records

        return warning_records(self.report.warnings) if self.report else []


def check_resolution(
    resolution: Resolution,
    *,
    http: httpx.Client | None = None,
    offline: bool = False,
    cache_dir: Path | None = None,
    on_status: Callable[[str], None] | None = None,
) -> NativeReport:
    """The native check of a resolution's wheels (reads cached by sha256); a
    package locked as an sdist or a direct reference without a wheel has none to
    read until install builds it, and a wheel a direct reference names by path
    is not read over HTTP."""
    client = http or client_for(resolution.profile)
    try:
        gate = NativeGate(resolution.profile, http=client, offline=offline,
                          cache_dir=cache_dir, on_status=on_status)
        gate(resolution.packages)
        assert gate.report is not None
        return gate.report
    finally:
        if http is None:
            client.close()


def render_native(report: NativeReport) -> list[str]:
    """The lines ``resolve`` and ``check`` print about a passing check."""
    from stacklock.native import summarize, warning_line, warning_records

    lines = [f"  native check: {report.wheels} wheels, {report.objects} shared "
             f"objects, {report.bytes_read / 1e6:.1f} MB read"]
    if report.unlinked:
        lines[0] += (f"; {report.unlinked} not read (no library links them "
                     "to another wheel)")
    if report.shared or report.shared_failures:
        lines[0] += f"; facts of {report.shared} wheels from STACKLOCK_NATIVE_FACTS"
    if report.shared_failures:
        lines.append(f"  warning: STACKLOCK_NATIVE_FACTS failed for "
                     f"{len(report.shared_failures)} entries, their wheels read "
                     f"instead (first: {report.shared_failures[0]})")
    lines.extend(f"  allowed by [check] allow: {line}"
                 for line in summarize(report.allowed))
    lines.extend(f"  native warning: {warning_line(record)}; no import of "
                 f"{record['package']} loads it" for record in
                 warning_records(report.warnings))
    if report.unread:
        owners = sorted({u.split(":", 1)[0] for u in report.unread})
        lines.append(f"  {len(report.unread)} large libraries known by name only "
                     f"(no extension needs their symbols): " + ", ".join(owners))
    unloaded: dict[str, set[str]] = {}
    for f in report.unloaded:
        unloaded.setdefault(f"{f.package} {f.version}", set()).add(f.object)
    if unloaded:
        lines.append("  not loaded in this stack (builds for another runtime): "
                     + ", ".join(f"{p} ({len(o)} libraries)"
                                 for p, o in sorted(unloaded.items())))
    systems = sorted({f.missing for f in report.notes})
    if systems:
        lines.append(f"  for the system to provide ({len(report.notes)} uses, "
                     f"not in the lock or the manylinux baseline): "
                     + ", ".join(systems))
    return lines


def render_resolve(result: ResolveResult) -> str:
    res = result.resolution
    lines = [headline(len(res.packages), res.profile.name, result.seconds,
                      result.lock)]
    for passed in res.passed_over:
        why = ("kept from the lock, with its pins" if passed.kept
               else "for what needs another" if passed.moved
               else "it would not load")
        lines.append(f"  passed over {passed.name} {passed.version} ({why}): "
                     f"{passed.reason}")
    for applied in res.overrides:
        lines.append(f"  override: {applied.package or 'profile'} {applied.original}"
                     f" -> {applied.override}")
    lines.extend(f"  warning: {text}" for text in res.warnings)
    for p in res.packages:
        if p.direct is not None:
            found = p.direct
            what = (f"commit {found.commit}" if found.commit else
                    f"sha256 {found.sha256}" if found.sha256 else "a source folder")
            lines.append(f"  direct reference: {found.ref.text} -> {p.name} "
                         f"{p.version} ({what})")
        if p.yanked is not None:
            lines.append(f"  warning: {p.name} {p.version} is yanked"
                         + (f" ({p.yanked})" if p.yanked else "")
                         + f"; used because the profile pins {p.name}=={p.version}")
    downloaded = [p.name for p in res.packages
                  if p.wheel is not None and p.wheel.hash_source == "download"
                  and p.direct is None]
    if downloaded:
        lines.append("  hashed by download (the index gave no single sha256): "
                     + ", ".join(downloaded))
    for finding in res.coherence:
        if finding.level != "ok":
            lines.append(f"  cuda {finding.level}: {finding.package}: "
                         f"{finding.message}")
    if result.native is not None:
        lines.extend(render_native(result.native))
    lines.extend(result.patch_lines)
    return "\n".join(lines)
