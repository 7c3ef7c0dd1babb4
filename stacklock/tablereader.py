"""Reading TOML tables with type checks whose errors name the file and the key path.

Profiles (``[target]``, ``[[index]]``, ``[validate]`` ...) and the copy of
``[validate]`` a lock carries are read through one :class:`TableReader`, so a typo
or a wrong type fails the same way everywhere: one line naming the file, the full
key path (``validate.gate.min-gpus``, ``index[1].url``), what was found and, where
it helps, what to write instead.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidName, NormalizedName, canonicalize_name

from stacklock.bounded import shorten, shown
from stacklock.errors import ProfileError, StacklockError

__all__ = ["TableReader", "parse_rfc3339"]


def parse_rfc3339(text: str) -> datetime | None:
    """An RFC 3339 date-time (``Z`` or an offset; Python 3.11 reads both), or None
    when ``text`` is not one. Time-zone-less values are returned as given; callers
    that need a zone check ``tzinfo``."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class TableReader:
    """Type checks for one file's tables. ``prefix`` is where the table being read
    sits (``validate`` in a profile, ``tool.stacklock.validate`` in a lock); it
    starts every key path in an error."""

    def __init__(self, path: str | None, prefix: str = "") -> None:
        self.path = path
        self.prefix = prefix

    def key(self, key: str) -> str:
        if not key:
            return self.prefix
        return f"{self.prefix}.{key}" if self.prefix else key

    def fail(self, key: str, message: str, hint: str | None = None) -> StacklockError:
        return ProfileError(message, path=self.path, key=self.key(key) or None,
                            hint=hint)

    def table(self, value: Any, key: str, allowed: set[str]) -> dict[str, Any]:
        """``value`` as a table holding only ``allowed`` keys."""
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, got {shown(value)}")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise self.fail(f"{key}.{unknown[0]}" if key else unknown[0],
                            f"unknown key {unknown[0]!r}",
                            hint="known keys: " + ", ".join(sorted(allowed)))
        return value

    def string(self, value: Any, key: str, hint: str | None = None) -> str:
        if not isinstance(value, str):
            if isinstance(value, float) and hint is None:
                hint = ('quote it: unquoted, TOML reads a version as a number '
                        '(3.10 becomes 3.1)')
            raise self.fail(key, f"expected a string, got {shown(value)}", hint=hint)
        return value

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of strings, got {shown(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{key}[{i}]", f"expected a string, got {shown(item)}")
        return tuple(value)

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {shown(value)}")
        return value

    def number(self, value: Any, key: str, *, positive: bool = True) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {shown(value)}")
        if positive and value <= 0:
            raise self.fail(key, f"expected a positive number, got {shown(value)}")
        return float(value)

    def integer(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(key, f"expected a positive integer, got {shown(value)}")
        return value

    def names(self, value: Any, key: str) -> tuple[NormalizedName, ...]:
        """Project names, canonicalized."""
        out: list[NormalizedName] = []
        for i, text in enumerate(self.strings(value, key)):
            try:
                out.append(canonicalize_name(text, validate=True))
            except InvalidName:
                raise self.fail(f"{key}[{i}]",
                                f"{text!r} is not a project name") from None
        return tuple(out)

    def requirements(self, value: Any, key: str) -> tuple[Requirement, ...]:
        """PEP 508 requirements."""
        out = []
        for i, text in enumerate(self.strings(value, key)):
            try:
                out.append(Requirement(text))
            except InvalidRequirement as exc:
                reason = shorten(str(exc).splitlines()[0])
                raise self.fail(f"{key}[{i}]", f"{shown(text)} is not a PEP 508 "
                                f"requirement: {reason}") from exc
        return tuple(out)

    def date_time(self, value: Any, key: str) -> datetime:
        """A TOML date-time or an RFC 3339 string, with a time zone."""
        if not isinstance(value, datetime | str):
            raise self.fail(key, f"expected a date-time, got {shown(value)}")
        parsed = value if isinstance(value, datetime) else parse_rfc3339(value)
        if parsed is None:
            raise self.fail(key, f"{shown(value)} is not an RFC 3339 date-time",
                            hint='write it as "2026-02-15T00:00:00Z"')
        if parsed.tzinfo is None:
            raise self.fail(key, f"{shown(value)} has no time zone",
                            hint="end it with Z for UTC")
        return parsed
