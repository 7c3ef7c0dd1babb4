"""The TOML side of a lock's tables: the values they hold, and reading them.

:class:`LockTable` reads one table of a lock through the shared
:class:`~stacklock.tablereader.TableReader` (the same type checks and messages as a
profile's), but its errors are :class:`LockError`: the lock is what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time
from typing import TYPE_CHECKING

from stacklock.bounded import shown
from stacklock.errors import LockError
from stacklock.tablereader import TableReader

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from packaging.requirements import Requirement

__all__ = ["LockTable", "LockTableReader", "TomlValue", "put"]

# What a TOML value can be, as tomllib gives it.
TomlValue = (
    str | int | float | bool | datetime | date | time
    | list["TomlValue"] | dict[str, "TomlValue"]
)  # fmt: skip


class LockTableReader(TableReader):
    """The shared table reader whose errors are LockErrors: a lock is wrong."""

    def fail(self, key: str, message: str, hint: str | None = None) -> LockError:
        return LockError(f"{self.path}: {self.key(key)}: {message}",
                         hint=hint or "regenerate the lock with stacklock resolve")


@dataclass(frozen=True)
class LockTable:
    """One table of a lock being read: its values and its key path
    (``tool.stacklock.cuda``); absent keys read as None or empty."""

    data: Mapping[str, object]
    reader: LockTableReader
    key: str

    @classmethod
    def of(cls, value: object, *, path: str, key: str,
           allowed: Iterable[str]) -> LockTable:
        reader = LockTableReader(path)
        return cls(reader.table(value, key, set(allowed)), reader, key)

    def _k(self, key: str) -> str:
        return f"{self.key}.{key}"

    def opt_str(self, key: str) -> str | None:
        value = self.data.get(key)
        return None if value is None else self.reader.string(value, self._k(key))

    def str_(self, key: str, default: str = "") -> str:
        value = self.opt_str(key)
        return default if value is None else value

    def opt_int(self, key: str) -> int | None:
        value = self.data.get(key)
        return None if value is None else self.reader.integer(value, self._k(key))

    def bool_(self, key: str) -> bool:
        value = self.data.get(key)
        return value is not None and self.reader.boolean(value, self._k(key))

    def strs(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        return () if value is None else self.reader.strings(value, self._k(key))

    def requirements(self, key: str) -> tuple[Requirement, ...]:
        value = self.data.get(key)
        return () if value is None else self.reader.requirements(value, self._k(key))

    def table(self, key: str, allowed: Iterable[str]) -> LockTable | None:
        value = self.data.get(key)
        if value is None:
            return None
        return LockTable(self.reader.table(value, self._k(key), set(allowed)),
                         self.reader, self._k(key))

    def tables(self, key: str, allowed: Iterable[str]) -> tuple[LockTable, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.reader.fail(self._k(key), f"expected an array of tables, "
                                   f"got {shown(value)}")
        out = []
        for i, item in enumerate(value):
            where = f"{self._k(key)}[{i}]"
            out.append(LockTable(self.reader.table(item, where, set(allowed)),
                                 self.reader, where))
        return tuple(out)


def put(out: dict[str, TomlValue], key: str, value: TomlValue | None) -> None:
    if value is not None:
        out[key] = value
