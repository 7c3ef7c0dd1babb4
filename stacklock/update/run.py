"""The update job, step by step (see the package doc): resolve, compare, validate,
bisect on failure, then write the lock and the summary, each whole or not at
all, and only when the lock changed."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stacklock._fs import atomic_write_bytes, atomic_write_text, check_writable

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from stacklock.lock import Lock

__all__ = ["CHANGED", "FAILING", "UNCHANGED", "UpdateResult",
           "UpdateTools", "Validation", "lock_digest", "update_lock"]

UNCHANGED, CHANGED, FAILING = 0, 4, 1  # exit codes (1: the answer is "no")


@dataclass(frozen=True, kw_only=True)
class Validation:
    """The new lock installed into the scratch venv and judged: stacklock's
    validation (``report``, its report.json) and the oracle command."""

    ok: bool
    verdict: str  # validate's: pass | fail | nothing checked; or "could not run"
    report: Mapping[str, Any] | None = None
    oracle: tuple[str, ...] = ()
    oracle_exit_code: int | None = None
    error: str | None = None  # validation could not run (install failed ...)
    committed: Mapping[str, Any] | None = None  # the committed lock's last report

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "verdict": self.verdict, "oracle": list(self.oracle),
                "oracle_exit_code": self.oracle_exit_code, "error": self.error,
                "report": self.report, "committed": self.committed}


@dataclass(frozen=True, kw_only=True)
class UpdateTools:
    """What update borrows from other verbs (handed in by the CLI):
    ``resolve()`` the lock text resolving the profile writes now and the
    seconds it took; ``diff(old, new)`` the semantic diff as (JSON, markdown);
    ``validate(lock)`` installs and judges a lock (None: not asked);
    ``recorded(lock)`` the last validation report kept for that lock's bytes;
    ``bisect(good, bad, validation)`` bisect's JSON between the two, with the
    oracle that failed (None: nothing to bisect with)."""

    resolve: Callable[[], tuple[str, float]]
    diff: Callable[[Lock, Lock], tuple[Mapping[str, Any], str]]
    validate: Callable[[Path], Validation] | None = None
    recorded: Callable[[Path], Mapping[str, Any] | None] = lambda _lock: None
    bisect: Callable[[Path, Path, Validation], Mapping[str, Any] | None] | None = None


@dataclass(frozen=True, kw_only=True)
class UpdateResult:
    profile: str
    lock: Path
    state: str  # unchanged | changed | failing
    released: str | tuple[str, ...]
    resolve_seconds: float
    seconds: float
    written: tuple[Path, ...] = ()
    diff: Mapping[str, Any] | None = None
    diff_markdown: str = ""
    passed_over: tuple[Mapping[str, str], ...] = ()
    validation: Validation | None = None
    bisect: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exit_code(self) -> int:
        return {"unchanged": UNCHANGED, "changed": CHANGED}.get(self.state, FAILING)

    @property
    def culprit(self) -> list[Any]:
        """The changes of bisect's first culprit and what moved with it."""
        culprits = list(self.bisect.get("culprits") or []) if self.bisect else []
        if not culprits:
            return []
        return [*culprits[0].get("changes", []), *culprits[0].get("moved_with_it", [])]

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "lock": str(self.lock),
                "state": self.state, "exit_code": self.exit_code,
                "released": (self.released if isinstance(self.released, str)
                             else list(self.released)),
                "resolve_seconds": round(self.resolve_seconds, 3),
                "seconds": round(self.seconds, 3),
                "written": [str(p) for p in self.written],
                "diff": self.diff,
                "passed_over": [dict(p) for p in self.passed_over],
                "validation": self.validation.to_dict() if self.validation else None,
                "bisect": self.bisect, "culprit": self.culprit,
                "notes": list(self.notes)}


def update_lock(
    lock_path: Path,
    *,
    profile: str,
    tools: UpdateTools,
    folder: Path,
    summary: Path | None = None,
    released: str | Sequence[str] = "all",
    render: Callable[[UpdateResult], str] | None = None,
) -> UpdateResult:
    """Resolve, and when the lock at ``lock_path`` would change: validate (if
    the tools can), bisect a failure, then write the lock and ``summary``
    (rendered by ``render``). ``folder`` holds the scratch work (the new lock
    while it is judged, the scratch venv, bisect's log, the reports kept)."""
    started = time.monotonic()
    for path in (lock_path, summary):  # before the work whose result they hold
        if path is not None:
            check_writable(path, example=path.name)
    text, resolve_seconds = tools.resolve()
    data = text.encode("utf-8")
    try:
        current: bytes | None = lock_path.read_bytes()
    except FileNotFoundError:
        current = None
    released = released if isinstance(released, str) else tuple(released)
    base = {"profile": profile, "lock": lock_path, "released": released,
            "resolve_seconds": resolve_seconds}
    if current == data:
        return UpdateResult(state="unchanged", seconds=time.monotonic() - started,
                            **base)  # type: ignore[arg-type]
    from stacklock.lock import parse_lock  # only for a changed lock (see above)

    new = parse_lock(data, path=f"{lock_path} (resolved now)")
    old = None if current is None else parse_lock(current, path=str(lock_path))
    diff, markdown = tools.diff(old, new) if old is not None else (None, "")
    passed_over = new.stack.check_passed_over if new.stack is not None else ()
    validation, bisected, notes = None, None, []
    if tools.validate is not None:
        folder.mkdir(parents=True, exist_ok=True)
        scratch = atomic_write_bytes(folder / "pylock.new.toml", data)
        committed = None
        if current is not None:
            kept = atomic_write_bytes(folder / "pylock.committed.toml", current)
            committed = tools.recorded(kept)
        judged = tools.validate(scratch)
        validation = Validation(**{**judged.__dict__, "committed": committed})
        if not validation.ok and current is not None and tools.bisect is not None:
            bisected = tools.bisect(folder / "pylock.committed.toml", scratch,
                                    validation)
            if bisected is None:
                notes.append("no oracle to bisect with: the failed checks depend "
                             "on the machine, not on a package")
        elif not validation.ok and current is None:
            notes.append("no committed lock to bisect against")
    state = "changed" if validation is None or validation.ok else "failing"
    result = UpdateResult(state=state, seconds=0.0, diff=diff,
                          diff_markdown=markdown, passed_over=tuple(passed_over),
                          validation=validation, bisect=bisected, notes=tuple(notes),
                          **base)  # type: ignore[arg-type]
    written = [atomic_write_bytes(lock_path, data, shared=True)]
    if summary is not None and render is not None:
        written.append(atomic_write_text(summary, render(result), shared=True))
    return _done(result, written, started)


def _done(result: UpdateResult, written: list[Path], started: float) -> UpdateResult:
    from dataclasses import replace

    return replace(result, written=tuple(written),
                   seconds=time.monotonic() - started)


def lock_digest(path: Path) -> str:
    """The sha256 of a lock's bytes: the key its validation reports are kept by."""
    return hashlib.sha256(path.read_bytes()).hexdigest()

