"""The toolkit and stack section of a diff: ``[tool.stacklock]`` key by key.

Both tables are flattened to dotted keys (the lock's ``requires-python`` and
``environments`` join them); the ``cuda`` keys become the toolkit section, the rest
the stack section. A snapshot's ``toolkit`` (found) is compared with a lock's
``cuda`` (wanted). The most telling keys (toolkit version, minimum driver, compat
floor, target, profile, overrides, indexes) come first. A runfile whose hash
changes under the same name is a red flag, like a wheel's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time
from typing import TYPE_CHECKING, TypeAlias

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

if TYPE_CHECKING:
    from stacklock.lock import Lock
    from stacklock.lock.toml import TomlValue

__all__ = ["FieldChange", "diff_stack", "flat_stack", "is_snapshot", "read_warnings"]

# Bookkeeping, not the stack: a snapshot's venv path and the names it could not
# trace are facts about the machine, derived from the packages already compared.
_IGNORED_KEYS = frozenset({"lock-version", "stacklock-version", "snapshot", "venv",
                           "unknown-origin", "validate"})
# A snapshot records the toolkit it found under ``toolkit``; a lock the one it
# wants under ``cuda``: the same fact, so they are compared with each other.
_RENAMED_TABLES = {"toolkit": "cuda"}
# A flattened value, JSON-able: TOML's dates become ISO strings.
Value: TypeAlias = "str | int | float | bool | list[Value] | dict[str, Value] | None"


def is_snapshot(lock: Lock) -> bool:
    return lock.snapshot is not None or "snapshot" in lock.created_by


def read_warnings(lock: Lock) -> list[str]:
    if lock.lock_version > Version("1.0"):
        return [f"{lock.path}: lock-version {lock.lock_version} is newer than 1.0; "
                "unknown keys were ignored"]
    return []


def flat_stack(lock: Lock) -> dict[str, Value] | None:
    """``[tool.stacklock]`` flattened to dotted keys; None when the lock has none."""
    info = lock.stack or lock.snapshot
    if info is None:
        return None
    flat: dict[str, Value] = {}
    for key, value in info.to_dict().items():
        if key not in _IGNORED_KEYS:
            _flatten(_RENAMED_TABLES.get(key, key), value, flat)
    return {**flat, **lock_fields(lock)}


def lock_fields(lock: Lock) -> dict[str, Value]:
    """What PEP 751 says of the whole lock, compared for every lock: the Python
    and environments it installs on, its extras and dependency groups."""
    flat: dict[str, Value] = {}
    if lock.requires_python is not None:
        flat["requires-python"] = str(lock.requires_python)
    for key, values in (("environments", lock.environments),
                        ("extras", lock.extras),
                        ("dependency-groups", lock.dependency_groups),
                        ("default-groups", lock.default_groups)):
        if values:
            flat[key] = [str(v) for v in values]
    return flat


def _flatten(key: str, value: TomlValue, out: dict[str, Value]) -> None:
    if isinstance(value, dict):
        for sub, item in value.items():
            _flatten(f"{key}.{sub}", item, out)
    elif isinstance(value, list):
        out[key] = [_plain(v) for v in value]
    else:
        out[key] = _plain(value)


def _plain(value: TomlValue) -> Value:
    """TOML values as JSON-able values (dates become ISO strings)."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class FieldChange:
    """One ``[tool.stacklock]`` key (dotted, ``cuda.`` dropped) that differs."""

    key: str
    old: Value
    new: Value


_FIRST_KEYS = (
    "cuda.version",
    "cuda.min-driver",
    "cuda.compat-floor",
    "cuda.bundled-driver",
    "target",
    "profile",
    "profile-sha256",
    "overrides",
    "indexes",
)


def _stack_order(key: str) -> tuple[int, str]:
    """Most telling keys first (toolkit version, minimum driver), then by name."""
    for rank, first in enumerate(_FIRST_KEYS):
        if key == first or key.startswith(first + "."):
            return rank, key
    return len(_FIRST_KEYS), key


def diff_stack(
    old: Lock, new: Lock
) -> tuple[tuple[FieldChange, ...], tuple[FieldChange, ...], tuple[str, ...]]:
    before_stack, after_stack = flat_stack(old), flat_stack(new)
    if before_stack is None or after_stack is None:
        missing = [lock.path for lock, flat in ((old, before_stack), (new, after_stack))
                   if flat is None]
        note = (
            f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no "
            "[tool.stacklock] table: toolkit and stack not compared (requires-python,"
            " environments, extras and groups are)"
        )
        was, now = lock_fields(old), lock_fields(new)
        fields = tuple(FieldChange(key=k, old=was.get(k), new=now.get(k))
                       for k in sorted(was.keys() | now.keys())
                       if was.get(k) != now.get(k))
        return (), fields, (note,)
    notes: tuple[str, ...] = ()
    keys = before_stack.keys() | after_stack.keys()
    snapshot = is_snapshot(old) or is_snapshot(new)
    if snapshot:
        keys = before_stack.keys() & after_stack.keys()
        notes = ("a snapshot is involved: keys recorded on one side only are skipped",)
    toolkit: list[FieldChange] = []
    stack: list[FieldChange] = []
    for key in sorted(keys, key=_stack_order):
        before, after = before_stack.get(key), after_stack.get(key)
        if before == after or (
            snapshot and key == "requires-python" and _python_fits(before, after)
        ):
            continue
        if key.startswith("cuda."):
            toolkit.append(
                FieldChange(key=key.removeprefix("cuda."), old=before, new=after)
            )
        else:
            stack.append(FieldChange(key=key, old=before, new=after))
    return tuple(toolkit), tuple(stack), notes


def toolkit_warnings(toolkit: tuple[FieldChange, ...]) -> list[str]:
    """The runfile's bytes changed under the same runfile name: the same red flag
    as a wheel whose hash changed."""
    changed = {f.key: f for f in toolkit}
    if "runfile" in changed:
        return []
    return [
        f"toolkit runfile: {key} changed under the same runfile name "
        f"({_show_hash(f.old)} -> {_show_hash(f.new)}): NVIDIA replaced the file "
        "or it was tampered with: verify it before installing"
        for key, f in changed.items()
        if key in ("sha256", "md5") and f.old is not None and f.new is not None
    ]


def _show_hash(value: Value) -> str:
    return str(value)[:12]


def _python_fits(a: Value, b: Value) -> bool:
    """A snapshot records the exact Python (``==3.12.7``); it matches a lock's
    ``==3.12.*`` when the lock's specifier contains that version."""
    for exact, spec in ((a, b), (b, a)):
        if isinstance(exact, str) and isinstance(spec, str):
            pinned = exact.removeprefix("==")
            if exact.startswith("==") and "*" not in pinned:
                try:
                    return SpecifierSet(spec).contains(pinned, prereleases=True)
                except InvalidSpecifier:
                    return False
    return False
