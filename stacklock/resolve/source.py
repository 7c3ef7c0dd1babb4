"""Where candidates and their metadata come from, fetched once and in parallel.

The resolver asks for two things: the candidates of a project (one index page per
index, through the finder) and the dependencies of a candidate (its METADATA,
through the metadata fetcher). Both are memoised as futures, so a question asked
twice, or asked while a background job is already answering it, is answered once.

Prefetch is speculative and never blocks the resolver: when a project is first
seen, a background job reads its page, picks the newest candidate that fits the
requirement, reads that candidate's METADATA and walks on to its dependencies,
the way uv's resolver runs ahead of its own decisions. When the resolver needs an
answer whose job is still queued, it takes the job over and runs it itself.
Only waiting for the network goes to the pool: a step whose page or METADATA is
fresh in the cache is pure CPU, which threads cannot share under the GIL, so the
walk takes it in the thread that is already walking (on a warm run, the
resolver's own thread, with no pool at all).
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.utils import NormalizedName, canonicalize_name

from stacklock.errors import StacklockError
from stacklock.http import MAX_CONNECTIONS
from stacklock.resolve.model import Candidate, iter_dependencies
from stacklock.resolve.preferences import Preferences, locked_first

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from packaging.requirements import Requirement as PepRequirement
    from packaging.specifiers import SpecifierSet

__all__ = ["PackageSource", "SourceStats", "candidates_of", "first_fit"]

@dataclass
class SourceStats:
    pages: int = 0
    metadata: int = 0
    prefetched: int = 0


def candidates_of(finder: Any, name: NormalizedName) -> list[Candidate]:
    """The versions ``finder`` (a :class:`stacklock.index.finder.Finder`) has of
    ``name`` as candidates, newest first, their files judged when first asked."""
    return [Candidate(name=name, version=g.version, files=g, index=g.index.name)
            for g in finder.version_groups(name)]


def first_fit(found: Iterable[Candidate], specifier: SpecifierSet, *,
              allow_prereleases: bool = False) -> Candidate | None:
    """The newest of ``found`` that ``specifier`` allows and that has a
    compatible file: the one the resolver tries first, so the one speculation
    reads (pre-releases where the profile allows them or the specifier names
    one)."""
    allow = allow_prereleases or bool(specifier.prereleases)
    return next((c for c in found if specifier.contains(c.version, prereleases=allow)
                 and c.usable), None)


class _Job:
    """A unit of work whose result is a future; it runs exactly once, either on
    the pool or in the thread that needs it first.

    A failure stacklock reports as one line (a :class:`StacklockError`: a page
    or METADATA that cannot be had) is kept without the frames it came through,
    and each :meth:`result` raises a copy of it. Raised as it is, the kept
    error would gather every frame it passes through, this job's and its
    source's among them, and make the whole resolution a reference cycle that
    only the cycle collector frees (a warm offline 207-package resolve left
    153,524 objects to it, and took 1.03 s against 0.95 s without).
    Any other exception (a bug) is kept and raised as it is, with its frames."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: Future[Any] = Future()
        self._claimed = threading.Lock()

    def run(self) -> None:
        if not self._claimed.acquire(blocking=False):
            return
        try:
            self.future.set_result(self.fn())
        except StacklockError as exc:
            self.future.set_exception(exc.with_traceback(None))
        except BaseException as exc:
            self.future.set_exception(exc)

    def result(self) -> Any:
        self.run()  # no-op when already running elsewhere
        failed = self.future.exception()
        if isinstance(failed, StacklockError):
            raise _copy_of(failed)
        return self.future.result()


def _copy_of(error: StacklockError) -> StacklockError:
    """A new exception of ``error``'s class with its message and attributes
    (hint, exit code, ...), made without calling its ``__init__`` (whose
    parameters differ from one class to the next)."""
    copy = type(error).__new__(type(error), *error.args)
    copy.__dict__.update(error.__dict__)
    return copy


class PackageSource:
    """Candidates and metadata for one resolution. ``finder`` is a
    :class:`stacklock.index.finder.Finder`, ``fetcher`` a
    :class:`stacklock.metadata.MetadataFetcher`; ``overrides`` maps a name to the
    specifier that replaces every requirement on it, so prefetch guesses the
    versions the resolver will actually pick; ``direct`` maps a name to the
    profile's direct reference of it, its one candidate."""

    def __init__(
        self,
        finder: Any,
        fetcher: Any,
        *,
        environment: Mapping[str, str],
        overrides: Mapping[NormalizedName, SpecifierSet] | None = None,
        prereleases: frozenset[NormalizedName] = frozenset(),
        direct: Mapping[NormalizedName, Any] | None = None,
        preferences: Preferences | None = None,
        workers: int = MAX_CONNECTIONS,
        prefetch: bool = True,
        on_progress: Callable[[SourceStats], None] | None = None,
    ) -> None:
        self._finder = finder
        self._fetcher = fetcher
        self._env = dict(environment)
        self._overrides = dict(overrides or {})
        self._prereleases = prereleases
        self._direct = dict(direct or {})  # name -> DirectArtifact
        self._preferences = preferences or Preferences()
        self._prefetch_enabled = prefetch and workers > 0
        self._pool = ThreadPoolExecutor(max_workers=max(workers, 1),
                                        thread_name_prefix="stacklock-prefetch")
        self._lock = threading.Lock()
        self._pages: dict[NormalizedName, _Job] = {}
        self._meta: dict[str, _Job] = {}
        self._seen: set[tuple[NormalizedName, frozenset[str]]] = set()
        # (id(METADATA), extras) -> (that METADATA, kept alive; its requirements)
        self._deps: dict[tuple[int, frozenset[str]], tuple[Any, tuple[Any, ...]]] = {}
        self._closed = False
        self.stats = SourceStats()
        self._on_progress = on_progress

    # -- what the resolver asks -------------------------------------------------

    def candidates(self, name: str) -> list[Candidate]:
        """Every version of ``name`` with a file that can fit, newest first; a
        candidate's files are judged when first asked (``evaluations``, empty
        when none is compatible after all: see :meth:`compatible`)."""
        return self._page_job(canonicalize_name(name)).result()  # type: ignore[no-any-return]

    def compatible(self, name: str) -> list[Candidate]:
        """The :meth:`candidates` with a compatible file, every version judged
        (for messages)."""
        return [c for c in self.candidates(name) if c.usable]

    def metadata(self, candidate: Candidate) -> Any:
        """The candidate's ``WheelMetadata`` (of its best wheel)."""
        return self._meta_job(candidate).result()

    def dependencies(self, meta: Any, extras: frozenset[str]
                     ) -> tuple[PepRequirement, ...]:
        """The requirements of ``meta`` (a ``WheelMetadata``) that apply on the
        target for ``extras``: markers evaluated once per METADATA and set of
        extras (the walk, the resolver and the lock all ask)."""
        key = (id(meta), extras)
        found = self._deps.get(key)
        if found is None or found[0] is not meta:
            found = self._deps[key] = (meta, tuple(iter_dependencies(
                meta.requires_dist, extras, self._env)))
        return found[1]

    def evaluate(self, name: str) -> list[Any]:
        """Every link of ``name`` with the reason it was skipped, for messages
        (none for a project of a direct reference: no index is asked for it)."""
        norm = canonicalize_name(name)
        return [] if norm in self._direct else list(self._finder.evaluate(norm))

    def count_wheels(self, name: str, version: Any) -> int:
        """How many wheels of ``version`` the project's index has, any tag."""
        return int(self._finder.count_wheels(canonicalize_name(name), version))

    def index_for(self, name: str) -> Any:
        return self._finder.index_for(canonicalize_name(name))

    def close_names(self, name: str) -> list[str]:
        """What the indexes list close to ``name``, which none of them has."""
        return list(self._finder.close_names(canonicalize_name(name)))

    # -- speculation --------------------------------------------------------------

    def prefetch(self, requirements: Iterable[PepRequirement]) -> None:
        """Start background work for projects not seen before. Returns at once,
        after doing itself what needs no request (see the module docstring)."""
        if not self._prefetch_enabled:
            return
        # One lock for the batch, and no pool work under it: the resolver's
        # thread must not queue behind busy prefetch threads for the GIL.
        keyed = [((canonicalize_name(r.name), frozenset(r.extras)), r)
                 for r in requirements]
        with self._lock:
            if self._closed:
                return
            new = [r for key, r in keyed if key not in self._seen]
            self._seen.update(key for key, _ in keyed)
        for req in new:
            if self._finder.is_local(canonicalize_name(req.name)):
                self._speculate(req, here=True)
            else:
                self._submit(functools.partial(self._speculate, req))

    def prefetch_metadata(self, candidates: Iterable[Candidate]) -> None:
        """Start reading the METADATA of ``candidates`` in the background (the
        resolver is about to try them one after another); returns at once. One
        already read, cached or on its way is not asked for again."""
        if not self._prefetch_enabled:
            return
        for candidate in candidates:
            self._meta_job(candidate)

    def _speculate(self, req: PepRequirement, *, here: bool = False) -> None:
        """Guess the candidate of ``req`` and walk on to its dependencies.
        ``here``: the page is local; a METADATA read that is not goes to the
        pool with the rest of the walk."""
        name = canonicalize_name(req.name)
        spec = self._overrides.get(name, req.specifier)
        try:
            found = self.candidates(name)
        except Exception:  # the resolver asks again and reports it
            return
        best = first_fit(locked_first(found, self._preferences.version_of(name)),
                         spec, allow_prereleases=name in self._prereleases)
        if best is None:
            return
        with self._lock:
            self.stats.prefetched += 1
        if here and best.direct is None and not self._fetcher.is_local(
                best.best.link):
            self._submit(functools.partial(self._walk, req, best))
        else:
            self._walk(req, best)

    def _walk(self, req: PepRequirement, best: Candidate) -> None:
        try:
            meta = self._meta_job(best).result()
        except Exception:  # reported when the resolver needs it
            return
        extras = frozenset(canonicalize_name(e) for e in req.extras)
        self.prefetch(self.dependencies(meta, extras))

    # -- memoised jobs ---------------------------------------------------------------

    def _page_job(self, name: NormalizedName) -> _Job:
        job = self._pages.get(name)  # the common case, without the lock
        if job is None:
            with self._lock:
                job = self._pages.get(name)
                if job is None:
                    job = self._pages[name] = _Job(
                        lambda: self._load_candidates(name))
        return job

    def _meta_job(self, candidate: Candidate) -> _Job:
        if candidate.direct is not None:  # read before the resolution started
            return self._direct_job(candidate.direct)
        link = candidate.best.link
        job = self._meta.get(link.url)  # the common case, without the lock
        if job is not None:
            return job
        with self._lock:
            job = self._meta.get(link.url)
            created = job is None
            if job is None:
                job = self._meta[link.url] = _Job(lambda: self._load_metadata(link))
        if created and self._prefetch_enabled and not self._closed and \
                not self._fetcher.is_local(link):
            self._submit(job.run)
        return job

    def _direct_job(self, direct: Any) -> _Job:
        key = f"direct {direct.ref.name}"
        job = self._meta.get(key)
        if job is None:
            with self._lock:
                job = self._meta.setdefault(key, _Job(lambda: direct.metadata))
        return job

    def _submit(self, fn: Callable[[], None]) -> None:
        try:
            self._pool.submit(fn)
        except RuntimeError:  # pool shut down after the resolution finished
            pass

    def _load_candidates(self, name: NormalizedName) -> list[Candidate]:
        direct = self._direct.get(name)
        if direct is not None:  # the profile's direct reference, and nothing else
            return [Candidate(name=name, version=direct.metadata.version,
                              direct=direct)]
        found = candidates_of(self._finder, name)
        self._count("pages")
        return found

    def _load_metadata(self, link: Any) -> Any:
        meta = self._fetcher.get(link)
        self._count("metadata")
        return meta

    def _count(self, kind: str) -> None:
        with self._lock:
            if kind == "pages":
                self.stats.pages += 1
            else:
                self.stats.metadata += 1
        if self._on_progress is not None:
            self._on_progress(self.stats)

    def close(self) -> None:
        """Stop speculating; jobs already running finish in the background.
        The jobs are let go: each holds a closure over this source, so kept
        here they would make the whole resolution (pages, candidates,
        METADATA) a reference cycle that only the cycle collector frees."""
        with self._lock:
            self._closed = True
            self._pages, self._meta = {}, {}
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> PackageSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
