"""Resolve a profile for its target: one candidate per project, each with one
hash-pinned wheel.

``resolve_profile`` wires the index layer (client, finder), the metadata fetcher
and the artifact store to resolvelib through :class:`StackProvider`, then settles
the hash of every chosen wheel. It never writes the lock; :mod:`stacklock.lock`
does, from the :class:`Resolution` returned here.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement as PepRequirement
from packaging.utils import NormalizedName, canonicalize_name
from resolvelib import (
    BaseReporter,
    ResolutionImpossible,
    ResolutionTooDeep,
    Resolver,
)

from stacklock._fs import cache_dir as default_cache_dir
from stacklock.errors import (
    IndexesUnreachable,
    IndexUnreadable,
    NativeCheckError,
    NativeError,
    ProfileError,
    ResolutionError,
)
from stacklock.http import MAX_CONNECTIONS, Credentials, make_http_client
from stacklock.index.client import IndexClient
from stacklock.index.finder import Finder
from stacklock.metadata import MetadataFetcher
from stacklock.metadata.build import make_build_setup
from stacklock.metadata.sdist import SdistReader
from stacklock.resolve import toolkit
from stacklock.resolve.direct import (
    DirectArtifact,
    find_direct,
    read_direct,
)
from stacklock.resolve.explain import explain_conflict, explain_refused_build
from stacklock.resolve.hashes import LockedWheel, known_wheel, settle_wheel
from stacklock.resolve.model import holds_on
from stacklock.resolve.moves import (
    SymbolNeed,
    kept_from_lock,
    newest_exporting,
    newness,
    provider_move,
    symbol_needs,
    with_choice,
)
from stacklock.resolve.preferences import Preferences
from stacklock.resolve.provider import Restart, StackProvider
from stacklock.resolve.result import Gate, PassedOver, Resolution, ResolvedPackage
from stacklock.resolve.rules import Rules, yanked_pins
from stacklock.resolve.source import PackageSource, SourceStats
from stacklock.resolve.variant_choice import choose_variants, pin_variants
from stacklock.runner import SubprocessRunner
from stacklock.store import ArtifactStore
from stacklock.urls import strip_credentials
from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import httpx

    from stacklock.metadata.listings import Listings
    from stacklock.profile import IndexSpec, Profile
    from stacklock.resolve.model import Candidate
    from stacklock.runner import Runner

__all__ = ["RUN_SECONDS", "Resolution", "ResolvedPackage", "client_for",
           "resolve_profile"]

MAX_ROUNDS = 5000
_EXTRA_IN_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_SPENT_SHOWN = 4  # projects a give-up names
MAX_PASSED_OVER = 16  # candidates the native check may pass over in one resolve
# resolutions at most: a first one, then one whose match-runtime builds get
# the runtime the first locked (a third only if that moved the runtime again)
RUNTIME_PASSES = 3


class _Reporter(BaseReporter):  # type: ignore[type-arg]
    """Hands each rejected candidate to the provider, which reads ahead the
    METADATA of the candidates the resolver will try next, and each pinned one
    to ``on_pin`` (the gate, which starts reading its wheel)."""

    def __init__(self, provider: StackProvider,
                 on_pin: Callable[[Candidate], None] | None = None) -> None:
        self._provider = provider
        self._on_pin = on_pin
        self.rounds = 0  # of every start of the resolution
        # project -> rounds spent on it: a pin, or every version failing
        self.spent: Counter[str] = Counter()
        self._rejected: str | None = None

    def starting_round(self, index: int) -> None:
        self.rounds += 1

    def resolving_conflicts(self, causes: Any) -> None:
        if self._rejected is not None:
            self.spent[self._rejected] += 1
        self._provider.conflict()

    def ending_round(self, index: int, state: Any) -> None:
        self._provider.ending_round(state.mapping.values())

    def rejecting_candidate(self, criterion: Any, candidate: Any) -> None:
        self._rejected = candidate.name
        self._provider.rejected(candidate, criterion)
        self._provider.prefetch_after(candidate)

    def pinning(self, candidate: Any) -> None:
        self.spent[candidate.name] += 1
        if self._on_pin is not None:
            self._on_pin(candidate)


RUN_SECONDS = 1800.0  # a whole resolve's requests, unless STACKLOCK_RUN_TIMEOUT says


def client_for(profile: Profile) -> httpx.Client:
    """The run's client: the credentials of the profile's indexes, and a
    deadline for the whole run (``STACKLOCK_RUN_TIMEOUT``, else 30 minutes)."""
    return make_http_client(
        credentials=Credentials((index.name, index.url) for index in profile.indexes),
        run_seconds=None if os.environ.get("STACKLOCK_RUN_TIMEOUT") else RUN_SECONDS)


def resolve_profile(
    profile: Profile,
    *,
    http: httpx.Client | None = None,
    cache_dir: Path | None = None,
    offline: bool = False,
    refresh: bool = False,
    workers: int = MAX_CONNECTIONS,
    prefetch: bool = True,
    cuda_entry: dict[str, Any] | None = None,
    preferences: Preferences | None = None,
    on_status: Callable[[str], None] | None = None,
    on_download: Callable[[str, int, int | None], None] | None = None,
    gate: Gate | None = None,
    runner: Runner | None = None,
    listings: Listings | None = None,
) -> Resolution:
    """Resolve ``profile``; raises ResolutionError (exit 1) when nothing fits.
    ``runner`` runs git for the profile's direct references (None: the real
    one). ``preferences``: the existing lock's pins, tried first
    (:mod:`stacklock.resolve.preferences`).

    ``gate`` (the native check) judges each complete resolution: the candidates
    it returns are passed over and the profile is resolved again without them,
    as if they had an unsatisfiable requirement; NativeCheckError when no
    combination is left.

    ``listings`` keeps the central directories METADATA reads held whole, for
    the gate's reader (:mod:`stacklock.metadata.listings`).

    ``cuda_entry`` replaces what ``stacklock.cuda.make_lock_entry`` would give.
    ``on_status`` receives short progress lines, ``on_download`` byte counts of
    the wheels downloaded to settle a hash."""
    started = time.monotonic()
    root = cache_dir or default_cache_dir()
    preferences = preferences or Preferences()
    own_http = http is None
    client_http = http or client_for(profile)
    profile = pin_variants(profile)
    try:
        client = IndexClient(client_http, cache_dir=root, offline=offline,
                             refresh=refresh)
        requirements = profile.requirements
        env = profile.target.marker_environment()
        finder = Finder(client, profile.indexes, profile.target,
                        exclude_newer=requirements.exclude_newer,
                        no_build=requirements.no_build_all or requirements.no_build,
                        yanked_pins=yanked_pins(
                            [*requirements.packages, *requirements.constraints,
                             *requirements.overrides], env))
        store = ArtifactStore(root / "artifacts")
        pins = stated_runtime_pins(profile)
        setup = make_build_setup(profile, log_dir=root / "logs", runtime_pins=pins)
        spec, variants = choose_variants(requirements, profile.gpu_variants,
                                         profile.target.gpu_arch, finder)
        refs = find_direct(spec, env, path=profile.path, base=(
            Path(profile.path).parent if profile.path else Path.cwd()))
        try:
            direct = {name: read_direct(
                ref, target=profile.target, http=client_http, store=store,
                root=root, runner=runner or SubprocessRunner(),
                setup=None if spec.refuses_build(name) else setup, offline=offline)
                for name, ref in refs.items()}
        except ProfileError as exc:  # named in the profile's file
            raise ProfileError(exc.detail, path=profile.path, key=exc.key,
                               hint=exc.hint) from None
        rules = Rules(environment=env, overrides=spec.overrides,
                      constraints=spec.constraints, prereleases=spec.prereleases,
                      direct=refs)
        wanted = [*spec.packages,
                  *(PepRequirement(t) for t in toolkit.extra_requirements(profile))]
        top = [r for r in wanted if holds_on(r, env)]

        def progress(stats: SourceStats) -> None:
            if on_status is not None:
                on_status(f"{stats.pages} pages, {stats.metadata} metadata read")

        for _pass in range(RUNTIME_PASSES):
            sdists = SdistReader(client_http, cache_dir=root, store=store, setup=setup)
            fetcher = MetadataFetcher(client_http, cache_dir=root, offline=offline,
                                      store=store, sdists=sdists,
                                      listings=listings)
            with PackageSource(finder, fetcher, environment=env,
                               overrides=rules.override_specifiers,
                               prereleases=spec.prereleases, direct=direct,
                               preferences=preferences, workers=workers,
                               prefetch=prefetch, on_progress=progress) as source:
                source.prefetch(top)
                packages, passed, chosen, extras, metas, coherence = _gated(
                    source, rules, top, profile, sdists=sdists, gate=gate,
                    preferences=preferences, settle=lambda cand, locked: settle_wheel(
                        cand, store=store, http=client_http, progress=on_download,
                        locked=locked), on_status=on_status)
                stats = source.stats
            passed = kept_from_lock(preferences.passed_over, {
                n: p.version for n, p in preferences.pins.items()}, packages, passed)
            locked = locked_runtime_pins(profile, chosen)
            if all(pins.get(n) == pin for n, pin in locked.items()):
                break
            pins = {**pins, **locked}  # build again against what was locked
            setup = make_build_setup(profile, log_dir=root / "logs",
                                     runtime_pins=pins)
        else:
            raise ResolutionError(
                f"profile {profile.name!r}: match-runtime builds did not settle "
                f"on one runtime ({', '.join(sorted(pins.values()))})",
                hint="pin the runtime projects of match-runtime exactly "
                '(packages = ["torch==2.9.1", ...])')
        warnings = unknown_extras(extras, metas)
        entry = cuda_entry if cuda_entry is not None else toolkit.lock_entry(
            profile)
    except IndexUnreadable as exc:
        if not exc.network:
            raise
        dead = client.find_unreachable(_probes(profile))
        if exc.index not in {d.index for d in dead}:
            dead.insert(0, exc)
        raise IndexesUnreachable(dead) from None
    finally:
        if own_http:
            client_http.close()
    return Resolution(profile=profile, packages=tuple(packages),
                      overrides=tuple(rules.applied(chosen)), cuda_entry=entry,
                      coherence=tuple(coherence), variants=variants,
                      seconds=time.monotonic() - started, stats=stats,
                      pages_read=dict(client.pages_read),
                      passed_over=tuple(passed), warnings=tuple(warnings))


def unknown_extras(extras: Mapping[NormalizedName, frozenset[str]],
                   metas: Mapping[NormalizedName, Any]) -> list[str]:
    """A warning for each extra asked of a project whose metadata has no such
    extra (installing it brings nothing more), as uv warns: never dropped
    without a word. An extra counts as known when Provides-Extra names it or a
    marker of Requires-Dist does (older metadata omits Provides-Extra)."""
    out = []
    for name, wanted in sorted(extras.items()):
        meta = metas.get(name)
        if meta is None:
            continue
        known = set(meta.provides_extra)
        for req in meta.requires_dist:
            if req.marker is not None:
                known.update(canonicalize_name(e) for e in
                             _EXTRA_IN_MARKER.findall(str(req.marker)))
        missing = sorted(wanted - known)
        if missing:
            out.append(f"{name} {meta.version} has no extra "
                       + ", ".join(repr(e) for e in missing)
                       + "; it adds nothing to the lock")
    return out


def _probes(profile: Profile) -> list[tuple[IndexSpec, str]]:
    """A page to ask each of the profile's indexes for: the first project it
    alone serves, else the profile's first requirement."""
    first = profile.requirements.packages[0].name if \
        profile.requirements.packages else "pip"
    return [(index, index.packages[0] if index.packages else first)
            for index in profile.indexes]


def _nothing_loads(passed: Sequence[PassedOver],
                   conflict: ResolutionError | None) -> NativeCheckError:
    """No combination imports: the candidates passed over, each with why, then
    what stopped the resolver from going further back."""
    from stacklock.native import summarize  # the check's own lines, one an object

    tried = "\n  ".join(line for p in passed for line in (
        summarize(p.findings) or [f"{p.name} {p.version}: {p.reason}"]))
    then = (f"without them: {str(conflict).splitlines()[0]}" if conflict is not None
            else f"gave up after passing over {len(passed)} candidates")
    return NativeCheckError(
        f"no combination of versions loads: passed over\n  {tried}\n{then}",
        findings=tuple(f for p in passed for f in p.findings),
        hint="pin versions built for each other (the counterparts "
        "named), or after review add [check] allow = [...] for the package")


def build_reason(cand: Candidate, source: PackageSource) -> str:
    """Why ``cand`` is locked as an sdist: its version has no wheel at all, or
    none of its wheels fits the target."""
    wheels = source.count_wheels(cand.name, cand.version)
    if not wheels:
        return f"{cand.name} {cand.version} publishes no wheel, only an sdist"
    return (f"none of the {counted(wheels, 'wheel')} of {cand.name} {cand.version} "
            "fits the target")


def stated_runtime_pins(profile: Profile) -> dict[str, str]:
    """The runtime pins of ``match-runtime`` the profile states itself: an
    exact ``==`` on a runtime project in its packages, overrides or
    constraints (then one pass suffices)."""
    spec = profile.requirements
    runtime = {n for names in spec.match_runtime.values() for n in names}
    pins: dict[str, str] = {}
    for req in (*spec.packages, *spec.overrides, *spec.constraints):
        name = canonicalize_name(req.name)
        exact = [s for s in req.specifier if s.operator in ("==", "===")
                 and "*" not in s.version]
        if name in runtime and req.marker is None and len(exact) == 1:
            pins[name] = f"{name}=={exact[0].version}"
    return pins


def locked_runtime_pins(profile: Profile,
                        chosen: list[Candidate]) -> dict[str, str]:
    """``name -> name==version`` for the runtime projects whose versions the
    builds of the chosen ``match-runtime`` sdists must get. A runtime project
    missing from the resolution is an error naming both."""
    by_name = {c.name: c for c in chosen}
    pins: dict[str, str] = {}
    for project, runtime in profile.requirements.match_runtime.items():
        cand = by_name.get(project)
        if cand is None or cand.best.link.is_wheel:
            continue  # not built: nothing to match
        for name in runtime:
            found = by_name.get(name)
            if found is None:
                raise ResolutionError(
                    f"profile {profile.name!r}: {project} builds against the "
                    f"locked {name} (match-runtime), and the resolution has no "
                    f"{name}",
                    hint=f"add {name} to [requirements] packages, or drop it "
                    f"from match-runtime.{project}")
            pins[name] = f"{name}=={found.version}"
    return pins


def _package(cand: Candidate, profile: Profile,
             graph: Mapping[str, set[NormalizedName]], meta: Any,
             source: PackageSource, sdists: SdistReader) -> ResolvedPackage:
    """The package as locked, its wheel's hash not settled yet."""
    if cand.direct is not None:
        return _direct_package(cand, graph, meta, source)
    index = profile.index_named(cand.index)
    link = cand.best.link
    return ResolvedPackage(
        name=cand.name, version=cand.version, index_name=cand.index,
        index_url=strip_credentials(index.url) if index else "",
        dependencies=tuple(sorted(graph.get(cand.name, ()))),
        wheel=LockedWheel(filename=link.filename, url=strip_credentials(link.url),
                          sha256="", hash_source="pending"),
        requires_dist=tuple(str(r) for r in source.dependencies(meta, frozenset())),
        build=None if link.is_wheel else build_reason(cand, source),
        yanked=link.yanked,
        metadata=None if link.is_wheel else sdists.how(link),
        match_runtime=() if link.is_wheel else tuple(
            profile.requirements.match_runtime.get(cand.name, ())))


def _direct_package(cand: Candidate, graph: Mapping[str, set[NormalizedName]],
                    meta: Any, source: PackageSource) -> ResolvedPackage:
    """A direct reference as locked: an archive with the sha256 it was read
    with (its wheel when it is one), a repository at its commit, a folder."""
    found: DirectArtifact = cand.direct
    ref = found.ref
    wheel = None
    if ref.kind == "archive":
        wheel = LockedWheel(
            filename=ref.filename or "", sha256=found.sha256 or "",
            url=strip_credentials(ref.url) if ref.url else str(ref.path),
            hash_source="url" if ref.sha256 else "download", size=found.size)
    return ResolvedPackage(
        name=cand.name, version=cand.version, index_name="", index_url="",
        dependencies=tuple(sorted(graph.get(cand.name, ()))), wheel=wheel,
        requires_dist=tuple(str(r) for r in source.dependencies(meta, frozenset())),
        build=None if wheel is None or ref.is_wheel
        else f"{cand.name} is a direct reference to an sdist", direct=found)


def _gated(source: PackageSource, rules: Rules, top: list[PepRequirement],
           profile: Profile, *, sdists: SdistReader,
           gate: Gate | None,
           preferences: Preferences,
           settle: Callable[[Candidate, Any], LockedWheel],
           on_status: Callable[[str], None] | None,
           ) -> tuple[list[ResolvedPackage], list[PassedOver], list[Candidate],
                      dict[NormalizedName, frozenset[str]], dict[NormalizedName, Any],
                      list[Any]]:
    """Resolve until ``gate`` (the native check) passes over nothing: the
    packages with their hashes settled, what was passed over, the chosen
    candidates, the extras asked of each, their metadata, the CUDA notes."""
    roots = [rules.make(r, parent=None) for r in top]
    names = [canonicalize_name(r.name) for r in top]
    on_pin = None if gate is None else _pin_to(gate, preferences)

    def attempt(excluded: set[tuple[NormalizedName, Any]], ahead: bool = True) -> Any:
        """A resolution without ``excluded``; ``ahead``: the gate starts
        reading its pinned wheels (not for one that only asks whether a
        provider can move)."""
        provider = StackProvider(source, rules, excluded=excluded,
                                 preferences=preferences, roots=roots)
        return _run(provider, roots, source, rules, profile.name,
                    on_pin=on_pin if ahead else None)

    passed: list[PassedOver] = []  # consumers, and providers moved
    excluded: set[tuple[NormalizedName, Any]] = set()
    found: Any = None  # a resolution already made for ``excluded``
    while True:  # again without what the gate passed over, if anything
        try:
            chosen, graph, extras = found or attempt(excluded)
        except ResolutionError as exc:
            if passed and gate is not None and gate.accept_warnings():
                passed, excluded = [], set()  # none loads whole: with warnings
                continue
            if passed:
                raise _nothing_loads(passed, exc) from None
            raise
        found = None
        metas = {c.name: source.metadata(c) for c in chosen}
        ordered = sorted(chosen, key=lambda c: c.name)
        pending = [_package(c, profile, graph, metas[c.name], source, sdists)
                   for c in ordered]
        # CUDA checks before any download: a mixed stack fails in seconds
        pending, coherence = toolkit.annotate(pending, profile)
        packages = []
        for cand, pkg in zip(ordered, pending, strict=True):
            if on_status is not None:
                on_status(f"choosing wheels: {cand.name} {cand.version}")
            if cand.direct is None:  # a direct reference is settled
                pkg = replace(pkg, wheel=settle(cand, preferences.pins.get(cand.name)))
            packages.append(pkg)
        rejected = list(gate(packages)) if gate is not None else []
        if not rejected:
            return (packages, with_choice(passed, packages), chosen, extras, metas,
                    list(coherence))
        if len(passed) + len(rejected) > MAX_PASSED_OVER:
            if gate is not None and gate.accept_warnings():
                passed, excluded = [], set()  # none loads whole: with warnings
                continue
            raise _nothing_loads([*passed, *rejected], None)
        # the consumers passed over, or their providers moved: whichever
        # leaves the profile's requirements newest (stacklock.resolve.moves)
        consumers = excluded | {(p.name, p.version) for p in rejected}
        exporting = {} if gate is None else _exporting(
            symbol_needs(rejected, chosen), chosen, source, top, excluded,
            attempt, gate, preferences)
        move = provider_move(rejected, chosen, graph, source, names, exporting)
        step, found = _newest(
            [(consumers, rejected)] + ([(excluded | move.excluded, list(move.passed))]
                                       if move is not None else []),
            attempt, names, source)
        excluded, passed = step[0], [*passed, *step[1]]


def _exporting(needs: Sequence[SymbolNeed], chosen: Sequence[Candidate],
               source: PackageSource, top: Sequence[PepRequirement],
               excluded: set[tuple[NormalizedName, Any]],
               attempt: Callable[[set[tuple[NormalizedName, Any]], bool], Any],
               gate: Gate, preferences: Preferences,
               ) -> dict[tuple[NormalizedName, NormalizedName], Any]:
    """For each consumer lacking symbols of its counterpart's families, the
    newest counterpart release that exports them (``moves.newest_exporting``):
    among the releases older than the locked one that the profile's and the
    consumer's own requirements on it allow, no newer than the newest a
    resolution without the locked one and those after it reaches (none: the
    counterpart cannot move, and nothing is read)."""
    by_name = {c.name: c for c in chosen}
    out: dict[tuple[NormalizedName, NormalizedName], Any] = {}
    for need in needs:
        name, consumer = need.provider, need.consumer.name
        wants = [r.specifier for r in top if canonicalize_name(r.name) == name]
        wants += [r.specifier for r in source.dependencies(
            source.metadata(by_name[consumer]), frozenset())
            if canonicalize_name(r.name) == name]
        older = [c for c in source.compatible(name) if c.version < need.version
                 and (name, c.version) not in excluded
                 and not c.version.is_prerelease
                 and all(s.contains(c.version, prereleases=True) for s in wants)]
        if not older:
            continue
        try:  # can it move at all? (a resolution, no check)
            moved = attempt(excluded | {(name, c.version)
                                        for c in source.candidates(name)
                                        if c.version >= need.version}, False)[0]
        except ResolutionError:
            continue
        reached = next((c.version for c in moved if c.name == name), None)
        if reached is None:
            continue
        wheels = {c.version: c for c in older if c.version <= reached}

        found = newest_exporting(list(wheels), functools.partial(
            _lacks, wheels=wheels, need=need, gate=gate,
            locked=preferences.pins.get(name)), need)
        if found is not None:
            known = out.get((consumer, name))
            out[(consumer, name)] = found if known is None else min(known, found)
    return out


def _lacks(version: Any, *, wheels: Mapping[Any, Candidate], need: SymbolNeed,
           gate: Gate, locked: Any) -> frozenset[str] | None:
    """What the consumer of ``need`` lacks beside the provider's release
    ``version``; None when there is nothing to read: the file the lock would
    record is not known without a download, or its facts cannot be had
    (``--offline`` and not cached, a read that fails). The release is then
    not tried, and without one that is, the consumer is passed over as
    before."""
    wheel = known_wheel(wheels[version], locked)
    if wheel is None or not wheel.filename.endswith(".whl"):
        return None
    try:
        return gate.lacks(need.consumer.name, need.provider, version, wheel)
    except NativeError:
        return None


def _newest(steps: list[tuple[set[tuple[NormalizedName, Any]], list[PassedOver]]],
            attempt: Callable[[set[tuple[NormalizedName, Any]], bool], Any],
            names: Sequence[NormalizedName], source: PackageSource,
            ) -> tuple[tuple[set[tuple[NormalizedName, Any]], list[PassedOver]], Any]:
    """Of the ``steps`` (exclusions, and what they pass over), the one whose
    resolution leaves the profile's requirements newest (``moves.newness``),
    with that resolution; the first when none resolves (it fails again, with
    its own message)."""
    if len(steps) == 1:
        return steps[0], None
    best: tuple[Any, int, Any] | None = None
    for at, (excluded, _) in enumerate(steps):
        try:
            found = attempt(excluded, True)
        except ResolutionError:
            continue
        key = newness(found[0], names, source)
        if best is None or key < best[0]:
            best = (key, at, found)
    if best is None:
        return steps[0], None
    return steps[best[1]], best[2]


def _pin_to(gate: Gate, preferences: Preferences) -> Callable[[Candidate], None]:
    """Tell ``gate`` of a pinned candidate's wheel, when the lock would record
    one whose sha256 is known without a download (a direct reference and an
    sdist have none to read yet)."""
    def on_pin(cand: Candidate) -> None:
        if cand.direct is not None or not cand.evaluations:
            return
        wheel = known_wheel(cand, preferences.pins.get(cand.name))
        if wheel is not None and wheel.filename.endswith(".whl"):
            gate.pinned(cand.name, cand.version, wheel)

    return on_pin


def _too_deep(profile: str, spent: Counter[str]) -> ResolutionError:
    """Giving up, with the projects the rounds went to: the ones whose ranges
    a user can narrow (the resolver tried version after version of them)."""
    top = spent.most_common(_SPENT_SHOWN)
    named = ", ".join(f"{name} ({n})" for name, n in top)
    first = top[0][0] if top else "a project"
    return ResolutionError(
        f"profile {profile!r}: gave up after {MAX_ROUNDS} resolver rounds; "
        f"the rounds went to choosing {named}",
        hint=f"narrow the versions of those projects: a range in [requirements] "
        f'constraints (such as "{first}>=X"), or a newer minimum on the '
        "profile's packages that require them")


def _run(provider: StackProvider, requirements: list[Any], source: PackageSource,
         rules: Rules, profile: str, *,
         on_pin: Callable[[Candidate], None] | None = None,
         ) -> tuple[list[Candidate], Mapping[str, set[NormalizedName]],
                    dict[NormalizedName, frozenset[str]]]:
    """Run resolvelib; return the base candidates, each one's dependencies
    (the dependencies of ``name[extra]`` belong to ``name``) and the extras
    asked of each project."""
    reporter = _Reporter(provider, on_pin)
    try:
        while True:  # again from the start after a Restart, in the same rounds
            try:
                result = Resolver(provider, reporter).resolve(
                    requirements, max_rounds=MAX_ROUNDS - reporter.rounds)
                break
            except Restart as restart:
                if not restart.learn:
                    provider.forget()
    except ResolutionImpossible as exc:
        refused = explain_refused_build(list(exc.causes), source, profile=profile)
        if refused is not None:
            raise ResolutionError(refused[0], hint=refused[1]) from None
        raise ResolutionError(
            explain_conflict(list(exc.causes), source, rules, profile=profile),
        ) from None
    except ResolutionTooDeep:
        raise _too_deep(profile, reporter.spent) from None
    chosen = [c for ident, c in result.mapping.items() if not c.extras]
    extras: dict[NormalizedName, frozenset[str]] = {}
    for c in result.mapping.values():
        if c.extras:
            extras[c.name] = extras.get(c.name, frozenset()) | c.extras
    graph: dict[str, set[NormalizedName]] = defaultdict(set)
    for ident in result.graph:
        if not isinstance(ident, str):
            continue  # the root
        owner = canonicalize_name(ident.split("[", 1)[0])
        for child in result.graph.iter_children(ident):
            name = canonicalize_name(str(child).split("[", 1)[0])
            if name != owner:
                graph[owner].add(name)
    return chosen, graph, extras
