"""The native check's reads for a set of wheels that grows while they run.

The check reads a wheel's shared objects only when a finding could join it to
another wheel (:func:`~stacklock.native.check.link_plan`: when another wheel
ships a library its objects may name, or when an object read elsewhere names
one of its own), and a large library
(libtorch_cpu: 120 MB of deflate, the longest single read) only when an
extension of another wheel needs its symbols
(:func:`~stacklock.native.check.large_members_needed`). Both rules look at the
whole set, and a resolution pins its candidates one by one: :class:`ReadAhead`
takes wheels as they come and reads what the rules ask for the set so far, so
the reads overlap the resolution instead of following it. It only fills the
reader (:class:`~stacklock.native.wheel.WheelReader`, cached by sha256, one
read per wheel at a time); the check then judges the set it is given, its own
reads finding them done.

A candidate the resolver drops after its read has cost its bytes, and is
counted in them; :meth:`ReadAhead.stop` ends what is left at the next answer.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import TYPE_CHECKING

from stacklock.native.check import (
    IF_NAMED,
    READ,
    large_members_needed,
    link_marks,
    link_plan_marked,
    names_a_library_of,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from stacklock.native.wheel import NativeWheel, WheelNatives, WheelReader

__all__ = ["ReadAhead", "links_large"]


def links_large(user: WheelNatives, owner: WheelNatives) -> bool:
    """Whether an object of ``user`` names a large member of ``owner``."""
    names = {path.rsplit("/", 1)[-1] for path in owner.large}
    return bool(names) and any(n in names for o in user.objects for n in o.needed)


class _Workers:
    """Threads taking tasks by priority (lowest first, then in order). A
    thread ends as soon as nothing is queued, and none holds the interpreter's
    exit: a read ahead that a server never answers is not waited for when the
    command ends (the check waits for what it needs itself; a facts entry is
    written whole or not at all)."""

    def __init__(self, threads: int) -> None:
        self._size = max(threads, 1)
        self._live = 0
        self._heap: list[tuple[tuple[int, int], int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, priority: tuple[int, int], task: Callable[[], None]) -> bool:
        """Queue ``task``; False once closed. A thread that cannot be started
        (no more threads, the interpreter exiting) raises RuntimeError, the
        task unqueued, when no other thread is there to take it."""
        entry = (priority, next(self._order), task)
        with self._lock:
            if self._closed:
                return False
            heapq.heappush(self._heap, entry)
            if self._live >= self._size:
                return True
            self._live += 1
            name = f"stacklock-native-{next(self._order)}"
        try:
            threading.Thread(target=self._work, name=name, daemon=True).start()
        except RuntimeError:
            with self._lock:
                self._live -= 1
                if self._live > 0 or entry not in self._heap:
                    return True  # a running thread takes it
                self._heap.remove(entry)
                heapq.heapify(self._heap)
            raise
        return True

    def close(self) -> list[Callable[[], None]]:
        """Take no more; returns the tasks not started."""
        with self._lock:
            self._closed = True
            dropped = [task for _, _, task in self._heap]
            self._heap.clear()
        return dropped

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._heap:
                    self._live -= 1
                    return
                _, _, task = heapq.heappop(self._heap)
            task()


# what is read first: a large member (the longest read) as soon as it is
# asked; then wheels holding large members (their own read decides whether
# those are asked); the rest the smallest first, so that the pairs that ask
# for a large member are complete early
_LIST, _LARGE, _OWNER, _OTHER = 0, 1, 2, 3
_LISTERS = 2  # threads listing directories, beside the readers


class ReadAhead:
    """Reads what the check of the wheels added so far would read.

    ``speculative``: the wheels may yet be dropped, so a failed read is left
    for the check to meet again (and report); otherwise :meth:`wait` raises the
    first failure. :meth:`stop` ends the reads at their next answer.
    ``on_read`` is told of each wheel whose shared objects were read."""

    def __init__(self, reader: WheelReader, *, threads: int, speculative: bool,
                 on_read: Callable[[NativeWheel], None] | None = None) -> None:
        self._reader = reader
        self._speculative = speculative
        self._on_read = on_read
        self._stopped = threading.Event()
        self._draining = False
        self._workers = _Workers(threads)
        # listing a wheel is quick (its directory is mostly known already): it
        # does not wait behind reads, which it decides
        self._listers = _Workers(_LISTERS)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = 0  # tasks submitted and not finished
        self._failures: list[BaseException] = []
        self._wheels: dict[str, NativeWheel] = {}  # sha256 -> wheel, in order
        self.files: dict[str, tuple[str, ...]] = {}  # sha256 -> listed members
        self._marks: dict[str, tuple[bool, bool]] = {}  # sha256 -> link_marks
        self._plan: dict[str, str] = {}  # sha256 -> link_plan, of the set so far
        self.read: dict[str, WheelNatives] = {}  # sha256 -> facts read
        self._asked: set[str] = set()  # sha256 of the reads submitted
        self._large: dict[str, set[str]] = {}  # sha256 -> large members asked

    def add(self, wheel: NativeWheel) -> None:
        """Take ``wheel`` into the set; its directory is listed at once."""
        key = wheel.sha256.lower()
        with self._lock:
            if key in self._wheels or self._is_stopped():
                return
            self._wheels[key] = wheel
        self._submit((_LIST, 0), self._list, wheel)

    def wait(self) -> None:
        """Until every read asked so far has ended; the first failure raised
        (not when speculative)."""
        with self._idle:
            self._idle.wait_for(lambda: self._running == 0)
            failures = list(self._failures)
        if failures and not self._speculative:
            raise failures[0]

    def drain(self) -> None:
        """Take no more: the reads not started are dropped, the running ones
        end as they would; returns at once."""
        with self._lock:
            self._draining = True
        for _task in [*self._listers.close(), *self._workers.close()]:
            self._finished(None)

    def stop(self) -> None:
        """End the reads: those not started are dropped, a running one ends at
        its next answer (:class:`~stacklock.native.wheel.ReadStopped`, its
        facts unsaved); returns at once."""
        self._stopped.set()
        self.drain()

    def _is_stopped(self) -> bool:
        return self._draining or self._stopped.is_set()

    def _submit(self, priority: tuple[int, int], task: Callable[..., None],
                *args: object) -> None:
        with self._lock:
            if self._is_stopped():
                return
            self._running += 1

        def run() -> None:
            failure = None
            try:
                task(*args)
            except Exception as exc:  # kept for wait(); a bug included
                failure = exc
            self._finished(failure)

        workers = self._listers if priority[0] == _LIST else self._workers
        try:
            taken = workers.submit(priority, run)
        except RuntimeError as exc:  # no thread to run it: a failure, not a hang
            self._finished(exc)
            return
        if not taken:  # drained meanwhile
            self._finished(None)

    def _finished(self, failure: BaseException | None) -> None:
        with self._idle:
            self._running -= 1
            if failure is not None:
                self._failures.append(failure)
            self._idle.notify_all()

    def _list(self, wheel: NativeWheel) -> None:
        files = self._reader.list_files(wheel, stop=self._stopped)
        key = wheel.sha256.lower()
        marks = link_marks(files)
        with self._lock:
            self.files[key] = files
            self._marks[key] = marks
            keys = list(self._marks)
            self._plan = dict(zip(keys, link_plan_marked(
                [self._marks[k] for k in keys]), strict=True))
            todo = [k for k in keys if k not in self._asked and self._plan[k] == READ]
            self._asked.update(todo)
            wheels = [self._wheels[k] for k in todo]
        self._read_all(wheels)

    def _read_all(self, wheels: list[NativeWheel]) -> None:
        for wheel in wheels:
            small, large = self._reader.planned_bytes(wheel)
            self._submit((_OWNER if large else _OTHER, small), self._read_one, wheel)

    def _named_by(self, key: str, natives: WheelNatives) -> list[NativeWheel]:
        """The wheels read only when named (:data:`IF_NAMED`) whose libraries
        an object of ``natives`` (wheel ``key``'s) names, marked asked; under
        the lock. Asked here, as each read ends, and nowhere else: a wheel is
        read if named only while no other wheel ships a linkable library, so
        the wheels whose objects may name it are read because it was listed,
        after it."""
        named = [k for k, plan in self._plan.items()
                 if plan == IF_NAMED and k != key and k not in self._asked
                 and names_a_library_of(natives, self.files[k])]
        self._asked.update(named)
        return [self._wheels[k] for k in named]

    def _read_one(self, wheel: NativeWheel) -> None:
        natives = self._reader.read(wheel, stop=self._stopped)
        if self._on_read is not None:
            self._on_read(wheel)
        key = wheel.sha256.lower()
        with self._lock:
            self.read[key] = natives
            others = [(k, n) for k, n in self.read.items() if k != key]
            named = self._named_by(key, natives)
        self._read_all(named)
        # a large member is the longest read: it starts as soon as a pair
        # read so far asks for it, not when every wheel has been read
        for other, theirs in others:
            if not (links_large(natives, theirs) or links_large(theirs, natives)):
                continue
            pair = [key, other]
            asked = large_members_needed([self._wheels[k] for k in pair],
                                         [natives, theirs])
            for at, paths in asked.items():
                self.ask_large(self._wheels[pair[at]], paths)

    def ask_large(self, wheel: NativeWheel, paths: set[str]) -> None:
        """Read the large members ``paths`` of ``wheel`` (those not asked yet)."""
        key = wheel.sha256.lower()
        with self._lock:
            asked = self._large.setdefault(key, set())
            new = paths - asked
            asked.update(new)
        if new:
            self._submit((_LARGE, 0), self._read_large, wheel, sorted(paths))

    def _read_large(self, wheel: NativeWheel, paths: list[str]) -> None:
        natives = self._reader.read_large(wheel, paths, stop=self._stopped)
        key = wheel.sha256.lower()
        with self._lock:
            self.read[key] = natives
            named = self._named_by(key, natives)
        self._read_all(named)
