"""One step of a bisect (an intermediate environment and its verdict) and the
log they are appended to, from which an interrupted bisect resumes.

``<dir>/bisect.log.jsonl``: a header line naming both locks (by sha256) and the
oracle, then one line per step. A second run with the same header replays the
logged verdicts instead of installing and running again; a log of other locks
or another oracle is refused rather than mixed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacklock.bounded import Malformed, parse_json, read_regular
from stacklock.errors import StacklockError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["LOG_NAME", "Step", "StepLog"]

LOG_NAME = "bisect.log.jsonl"
LOG_VERSION = 1
MAX_LOG_BYTES = 64 << 20  # a step is a line of ~300 bytes


@dataclass(frozen=True, kw_only=True)
class Step:
    """What one state was, how it was judged, and what it cost."""

    number: int
    applied: tuple[str, ...]  # the changes at BAD (sorted names); the rest GOOD
    state: str  # good | bad | skip | incoherent
    exit_code: int | None = None
    seconds: float = 0.0  # the oracle's
    install_seconds: float = 0.0
    bytes_fetched: int = 0
    samples: tuple[float, ...] = ()
    note: str = ""
    lock: str = ""
    ran: bool = True  # the oracle ran (an incoherent mix is not even installed)
    resumed: bool = False  # replayed from the log of an earlier run

    def to_dict(self) -> dict[str, object]:
        return {"step": self.number, "applied": list(self.applied),
                "state": self.state, "exit_code": self.exit_code,
                "seconds": round(self.seconds, 3),
                "install_seconds": round(self.install_seconds, 3),
                "bytes_fetched": self.bytes_fetched, "samples": list(self.samples),
                "note": self.note, "lock": self.lock, "ran": self.ran,
                "resumed": self.resumed}

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, where: str) -> Step:
        try:
            if not isinstance(data, dict):
                raise TypeError(f"a JSON object, not {type(data).__name__}")
            applied, samples = data["applied"], data.get("samples", [])
            if not isinstance(applied, list) or not isinstance(samples, list):
                raise TypeError("applied and samples are lists")
            code = data.get("exit_code")
            return cls(
                number=int(_number(data["step"])),
                applied=tuple(str(n) for n in applied),
                state=str(data["state"]),
                exit_code=None if code is None else int(_number(code)),
                seconds=_number(data.get("seconds", 0.0)),
                install_seconds=_number(data.get("install_seconds", 0.0)),
                bytes_fetched=int(_number(data.get("bytes_fetched", 0))),
                samples=tuple(_number(s) for s in samples),
                note=str(data.get("note", "")),
                lock=str(data.get("lock", "")),
                ran=data.get("ran", True) is True,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StacklockError(f"{where}: not a bisect step ({exc!r})",
                                 hint="remove the log to start afresh") from None


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


class StepLog:
    """The log of one bisect: what earlier runs found, and each new step."""

    def __init__(self, path: Path, header: Mapping[str, object]) -> None:
        self.path = path
        self.header = {"bisect-log": LOG_VERSION, **header}
        self.earlier: dict[tuple[str, ...], Step] = {}
        self.count = 0  # step lines in the log: new steps' folders never reuse one
        if path.exists():
            self._read()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.header, sort_keys=True) + "\n", "utf-8")

    def _read(self) -> None:
        try:
            lines = read_regular(self.path, limit=MAX_LOG_BYTES).decode(
                "utf-8").splitlines()
        except (Malformed, UnicodeDecodeError, OSError) as exc:
            what = ("not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else
                    str(exc) if isinstance(exc, Malformed) else
                    f"cannot be read: {exc.strerror or exc}")
            raise StacklockError(f"{self.path}: not a bisect log ({what})",
                                 hint="pass another --dir, or remove the log to "
                                 "start afresh") from None
        try:
            header = parse_json(lines[0]) if lines else None
        except Malformed:
            header = None
        if header != self.header:
            raise StacklockError(
                f"{self.path}: the log of a bisect of other locks or another oracle",
                hint="pass another --dir, or remove the log to start afresh")
        for i, line in enumerate(lines[1:], start=2):
            try:
                data = parse_json(line)
            except Malformed as exc:
                if not exc.bound:
                    continue  # a line cut by an interruption: that step runs again
                raise StacklockError(f"{self.path}:{i}: not a bisect step ({exc})",
                                     hint="remove the log to start afresh") from None
            step = Step.from_dict(data, where=f"{self.path}:{i}")
            self.earlier[step.applied] = step
            self.count += 1

    def append(self, step: Step) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(step.to_dict(), sort_keys=True) + "\n")
        self.count += 1
