"""``stacklock bisect GOOD BAD``: the whole run, from two locks to a culprit.

The pieces that belong to other verbs are passed in (:class:`Tools`): the
semantic diff that lists the changes, the install of a lock into the scratch
venv, and the requirement reader. Everything else is here: the groups, the
mixes and their coherence, the oracle runs and their log, the search.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

from stacklock.bisect.changes import TOOLKIT, group_changes
from stacklock.bisect.mix import (
    Violation,
    absolute_paths,
    make_mix,
    mix_violations,
)
from stacklock.bisect.oracle import (
    BAD,
    GOOD,
    MEASURED,
    SKIP,
    Verdict,
    classify,
    separated,
    venv_env,
)
from stacklock.bisect.search import find_culprits
from stacklock.bisect.steps import LOG_NAME, Step, StepLog
from stacklock.errors import LockError, StacklockError
from stacklock.lock import load_lock
from stacklock.words import first

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.version import Version

    from stacklock.bisect.changes import Change, ChangeGraph, Group
    from stacklock.bisect.oracle import Oracle
    from stacklock.bisect.requirements import Requirements
    from stacklock.bisect.search import Found
    from stacklock.lock import Lock, LockedPackage

# What an oracle keeps between runs, each in its step's scratch folder (removed
# when the step ends, before the next one installs): temporary files, and the
# caches of code compiled against the step's packages, which another step's
# torch or Triton must never load (Triton's kernels, torch extensions, Inductor's
# code, the CUDA driver's PTX cache). Models and downloads (XDG_CACHE_HOME,
# HF_HOME) stay where the user keeps them.
STEP_SCRATCH = {"TMPDIR": ".", "TRITON_CACHE_DIR": "triton",
                "TORCH_EXTENSIONS_DIR": "torch_extensions",
                "TORCHINDUCTOR_CACHE_DIR": "inductor", "CUDA_CACHE_PATH": "nv"}

__all__ = ["BisectResult", "Culprit", "OutOfSteps", "Tools", "bisect_locks",
           "group_locks"]

INCOHERENT = "incoherent"
_REPLAYED = (GOOD, BAD, SKIP, MEASURED)  # what an earlier run's oracle settled
LAST_GOOD, FIRST_BAD = "pylock.last-good.toml", "pylock.first-bad.toml"


@dataclass(frozen=True, kw_only=True)
class Tools:
    """What bisect borrows: ``diff(good, bad)`` lists the changes;
    ``install(lock, venv)`` installs a lock into the scratch venv and returns
    the bytes it fetched (a :class:`StacklockError` skips the state);
    ``requirements(lock)`` makes the reader of a package's requirements on that
    lock's target; ``read_bytes()`` the bytes those reads took so far."""

    diff: Callable[[Lock, Lock], Sequence[Change]]
    install: Callable[[Path, Path], int]
    requirements: Callable[[Lock], Requirements]
    read_bytes: Callable[[], int] = lambda: 0


@dataclass(frozen=True, kw_only=True)
class Culprit:
    changes: tuple[Change, ...]  # the culprit's own groups
    moved: tuple[Change, ...]  # and what must move with it
    verified: bool | None  # BAD with it reverted passed (None: skipped)
    confirmed: bool  # GOOD with it applied failed
    ambiguous: bool  # skipped states left groups that could not be split

    def to_dict(self) -> dict[str, object]:
        return {"changes": [c.to_dict() for c in self.changes],
                "moved_with_it": [c.to_dict() for c in self.moved],
                "verified": self.verified, "confirmed": self.confirmed,
                "ambiguous": self.ambiguous}


@dataclass(frozen=True, kw_only=True)
class BisectResult:
    good: str
    bad: str
    groups: tuple[Group, ...]
    culprits: tuple[Culprit, ...]
    steps: tuple[Step, ...]
    last_good: str | None = None
    first_bad: str | None = None
    stopped: str | None = None  # why no culprit was named
    notes: tuple[str, ...] = ()
    metadata_bytes: int = 0  # read to group the changes and check the mixes

    @property
    def oracle_runs(self) -> int:
        return sum(s.ran for s in self.steps)

    @property
    def found(self) -> bool:
        return bool(self.culprits) and self.stopped is None

    def to_dict(self) -> dict[str, object]:
        return {
            "good": self.good, "bad": self.bad, "found": self.found,
            "culprits": [c.to_dict() for c in self.culprits],
            "groups": [g.to_dict() for g in self.groups],
            "steps": [s.to_dict() for s in self.steps],
            "oracle_runs": self.oracle_runs,
            "bytes_fetched": sum(s.bytes_fetched for s in self.steps),
            "metadata_bytes": self.metadata_bytes,
            "last_good": self.last_good, "first_bad": self.first_bad,
            "stopped": self.stopped, "notes": list(self.notes),
        }


class OutOfSteps(Exception):
    """``--max-steps`` oracle runs were made (internal: ends the search)."""


@dataclass(kw_only=True)
class _Session:
    """The states tried so far, and how to try a new one."""

    good: Lock
    bad: Lock
    graph: ChangeGraph
    tools: Tools
    oracle: Oracle
    folder: Path
    log: StepLog
    max_steps: int
    on_step: Callable[[Step], None] | None
    check: Callable[[Lock], set[Violation]]
    baseline: set[Violation]
    ends: dict[str, tuple[float, ...]] = field(default_factory=dict)
    states: dict[frozenset[int], str] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)

    def lock_for(self, groups: frozenset[int], path: Path) -> Lock:
        return make_mix(self.good, self.bad, self.graph.names(groups),
                        path=str(path))

    def test(self, groups: frozenset[int]) -> str:
        if groups not in self.states:
            self.states[groups] = self._try(groups)
        return self.states[groups]

    def _try(self, groups: frozenset[int]) -> str:
        applied = tuple(sorted(self.graph.names(groups)))
        earlier = self.log.earlier.get(applied)
        # replayed: what the oracle said; an incoherent mix is checked again and
        # a failed install (the environment's, not the state's) tried again
        if earlier is not None and earlier.ran and earlier.state in _REPLAYED:
            return self._record(earlier, resumed=True)
        if earlier is None and sum(s.ran for s in self.steps) >= self.max_steps:
            raise OutOfSteps
        number = len(self.steps) + 1
        key = self.log.count + 1  # unique across resumed runs
        folder = self.folder / "steps" / f"{key:03d}"
        path = folder / f"pylock.step-{key:03d}.toml"
        mix = self.lock_for(groups, path)
        broken = sorted(self.check(mix) - self.baseline)
        if broken:
            learnt = [self._learn(v, groups) for v in broken]
            note = first([str(b) for b in broken], 1)
            if any(learnt):
                note += "; regrouped: " + ", ".join(n for n in learnt if n)
            self._record(Step(number=number, applied=applied, state=INCOHERENT,
                              note=note, ran=False),
                         resumed=earlier is not None and earlier.state == INCOHERENT)
            wider = self.graph.up(groups)
            return self.test(wider) if wider != groups else SKIP
        from stacklock.lock.write import dump_lock  # tomlkit: only when a step runs

        dump_lock(mix, path)
        venv = (self.folder / "venv").absolute()
        started = time.monotonic()
        try:
            fetched = self.tools.install(path, venv)
        except StacklockError as exc:
            return self._record(Step(
                number=number, applied=applied, state=SKIP, lock=str(path),
                install_seconds=time.monotonic() - started, ran=False,
                note=f"install failed: {exc}"))
        installed = time.monotonic() - started
        cuda = mix.cuda
        home = cuda.prefix if cuda is not None and cuda.source == "runfile" else None
        # the oracle's scratch state is the step's, gone when it ends
        scratch = (folder / "tmp").absolute()  # a program may change directory
        places = {key: scratch / name for key, name in STEP_SCRATCH.items()}
        for place in places.values():
            place.mkdir(parents=True, exist_ok=True)
        env = {**venv_env(venv, str(home) if home else None),
               **{key: str(place) for key, place in places.items()}}
        try:
            verdict = self._judge(venv, env, folder / "oracle.log", path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return self._record(Step(
            number=number, applied=applied, state=verdict.state,
            exit_code=verdict.exit_code, seconds=verdict.seconds,
            install_seconds=installed, bytes_fetched=fetched,
            samples=verdict.samples, note=verdict.note, lock=str(path)))

    def _learn(self, broken: Violation, groups: frozenset[int]) -> str | None:
        """The need a mix showed: the asker at BAD needs the required package
        at BAD too, or the required package at BAD needs the asker there."""
        asker = self.graph.group_of(broken.asker)
        required = self.graph.group_of(broken.required)
        if asker is None or required is None:
            return None
        source, target = ((asker, required) if asker in groups
                          else (required, asker))
        if not self.graph.learn(source, target):
            return None
        return (f"{self.graph.groups[source].label} needs "
                f"{self.graph.groups[target].label}")

    def _judge(self, venv: Path, env: Mapping[str, str], log: Path,
               lock: Path) -> Verdict:
        verdict = self.oracle.judge(venv, env, log, lock)
        if verdict.state != MEASURED:
            return verdict
        if len(self.ends) < 2:  # an end: classified by the caller
            return verdict
        good, bad = self.ends[GOOD], self.ends[BAD]
        state = classify(verdict.samples, good, bad)
        if state is None:  # unclear: measure once more, then give up
            again = self.oracle.judge(venv, env, log, lock)
            samples = verdict.samples + again.samples
            state = classify(samples, good, bad)
            verdict = Verdict(state=MEASURED, seconds=verdict.seconds + again.seconds,
                              samples=samples)
        if state is None:
            return Verdict(state=SKIP, seconds=verdict.seconds,
                           samples=verdict.samples,
                           note="unclear: the numbers lie between GOOD's and BAD's")
        return Verdict(state=state, seconds=verdict.seconds, samples=verdict.samples)

    def _record(self, step: Step, *, resumed: bool = False) -> str:
        number = len(self.steps) + 1
        if resumed:
            step = replace(step, number=number, resumed=True)
        else:
            self.log.append(step)
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        return step.state


def _versions(lock: Lock, names: Sequence[str]) -> dict[str, Version | None]:
    found = {name: lock.package(name) for name in names}
    return {name: p.version if p is not None else None for name, p in found.items()}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def group_locks(good: Lock, bad: Lock, changes: Sequence[Change],
                read_good: Requirements, read_bad: Requirements) -> ChangeGraph:
    """The ``changes`` from ``good`` to ``bad``, grouped by the requirements
    each end's entries declare (see :mod:`~stacklock.bisect.changes`)."""
    if not changes:
        raise LockError(f"{good.path} and {bad.path} lock the same packages and "
                        "toolkit: nothing to bisect",
                        hint="pass the lock that works and the one that does not")
    names = [c.name for c in changes if c.name != TOOLKIT]

    def requirements(name: str, end: str, extras: frozenset[str]
                     ) -> Sequence[Requirement]:
        lock, read = (good, read_good) if end == "good" else (bad, read_bad)
        pkg = lock.package(name)
        return read(pkg, extras) if pkg is not None else ()

    return group_changes(changes, good=_versions(good, names),
                         bad=_versions(bad, names), requirements=requirements)


def bisect_locks(
    good_path: Path,
    bad_path: Path,
    *,
    folder: Path,
    tools: Tools,
    oracle: Oracle,
    oracle_id: str,
    max_steps: int = 30,
    on_step: Callable[[Step], None] | None = None,
    on_groups: Callable[[Sequence[Group]], None] | None = None,
) -> BisectResult:
    """Find the smallest group of changes that turns ``good_path`` into
    ``bad_path`` under ``oracle``; the work (log, step locks, scratch venv and
    the two bracketing locks) goes to ``folder``."""
    good = absolute_paths(load_lock(good_path))
    bad = absolute_paths(load_lock(bad_path))
    read_good, read_bad = tools.requirements(good), tools.requirements(bad)
    graph = group_locks(good, bad, tools.diff(good, bad), read_good, read_bad)
    names = [n for g in graph.groups for n in g.names if n != TOOLKIT]
    if on_groups is not None:
        on_groups(graph.groups)

    def reader_of(pkg: LockedPackage) -> Requirements:
        return read_bad if bad.package(pkg.name) is pkg else read_good

    def check(lock: Lock) -> set[Violation]:
        found: set[Violation] = set()
        for name in names:
            pkg = lock.package(name)
            if pkg is None:
                continue
            found |= mix_violations(lock, [name], reader_of)
        return found

    folder.mkdir(parents=True, exist_ok=True)
    log = StepLog(folder / LOG_NAME, {"good": _digest(good_path),
                                      "bad": _digest(bad_path), "oracle": oracle_id})
    session = _Session(good=good, bad=bad, graph=graph, tools=tools, oracle=oracle,
                       folder=folder, log=log, max_steps=max_steps, on_step=on_step,
                       check=check, baseline=check(good) | check(bad))
    everything = frozenset(range(len(graph.groups)))
    result = partial(BisectResult, good=str(good_path), bad=str(bad_path),
                     groups=graph.groups, metadata_bytes=tools.read_bytes())
    try:
        stopped = _ends(session, everything)
        if stopped is not None:
            return result(culprits=(), steps=tuple(session.steps), stopped=stopped)
        found = find_culprits(graph, session.test)
    except OutOfSteps:
        return result(culprits=(), steps=tuple(session.steps),
                      stopped=f"--max-steps {max_steps} reached; run again with "
                      "a higher --max-steps to resume from the log")
    culprits = tuple(_culprit(graph, f) for f in found)
    first = found[0]
    last_good = _write_end(session, first.last_good, folder / LAST_GOOD)
    first_bad = _write_end(session, first.first_bad, folder / FIRST_BAD)
    notes = _notes(found, graph)
    return result(culprits=culprits, steps=tuple(session.steps),
                  last_good=str(last_good), first_bad=str(first_bad),
                  notes=tuple(notes))


def _ends(session: _Session, everything: frozenset[int]) -> str | None:
    """Test GOOD and BAD themselves; why bisecting stops, or None."""
    good_state = session.test(frozenset())
    bad_state = session.test(everything)
    steps = {s.applied: s for s in session.steps}
    if good_state == MEASURED and bad_state == MEASURED:
        good = steps[()].samples
        bad = steps[tuple(sorted(session.graph.names(everything)))].samples
        if not separated(good, bad):
            return (f"GOOD ({_numbers(good)}) and BAD ({_numbers(bad)}) measure "
                    "too close to tell apart; raise --repeat or check the gate")
        session.ends.update({GOOD: good, BAD: bad})
        session.states.update({frozenset(): GOOD, everything: BAD})
        session.steps[:2] = [replace(session.steps[0], state=GOOD),
                             replace(session.steps[1], state=BAD)]
        return None
    for name, state, want, step in (("GOOD", good_state, GOOD, session.steps[0]),
                                    ("BAD", bad_state, BAD, session.steps[-1])):
        if not step.ran:  # the end itself cannot be installed: the environment
            raise StacklockError(f"{name} ({step.lock}): {step.note}")
        if state != want:
            why = f": {step.note}" if step.note else ""
            return (f"{name} is not {want} under the oracle (state {state}"
                    f"{why}); check the command on {name} itself")
    return None


def _numbers(values: Sequence[float]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _culprit(graph: ChangeGraph, found: Found) -> Culprit:
    own = [c for i in sorted(found.groups) for c in graph.groups[i].changes]
    moved = [c for i in sorted(found.moved - found.groups)
             for c in graph.groups[i].changes]
    return Culprit(changes=tuple(own), moved=tuple(moved), verified=found.verified,
                   confirmed=found.confirmed, ambiguous=found.ambiguous)


def _notes(found: Sequence[Found], graph: ChangeGraph) -> list[str]:
    notes = []
    for f in found:
        if f.verified is False and f is found[-1]:
            notes.append("BAD still fails with every culprit found reverted; "
                         "the search stopped (see the steps)")
        if f.ambiguous:
            notes.append("skipped states left changes that could not be told "
                         "apart; they are named together")
    return notes


def _write_end(session: _Session, groups: frozenset[int], path: Path) -> Path:
    from stacklock.lock.write import dump_lock

    dump_lock(session.lock_for(groups, path), path)
    return path
