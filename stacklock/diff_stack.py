"""The toolkit and stack section of a diff: ``[tool.stacklock]`` key by key.

Both tables are flattened to dotted keys by :mod:`stacklock.diff_read`; the ``cuda``
keys become the toolkit section, the rest the stack section. The most telling keys
(toolkit version, minimum driver, compat floor, target, profile, overrides,
indexes) come first. A runfile whose hash changes under the same name is a red flag,
like a wheel's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

if TYPE_CHECKING:
    from stacklock.diff_read import LockView

__all__ = ["FieldChange", "diff_stack", "toolkit_warnings"]


@dataclass(frozen=True, kw_only=True)
class FieldChange:
    """One ``[tool.stacklock]`` key (dotted, ``cuda.`` dropped) that differs."""

    key: str
    old: Any
    new: Any


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
    old: LockView, new: LockView
) -> tuple[tuple[FieldChange, ...], tuple[FieldChange, ...], tuple[str, ...]]:
    if old.stack is None or new.stack is None:
        missing = [v.path for v in (old, new) if v.stack is None]
        note = (
            f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no "
            "[tool.stacklock] table: toolkit and stack not compared"
        )
        return (), (), (note,)
    notes: tuple[str, ...] = ()
    keys = old.stack.keys() | new.stack.keys()
    snapshot = old.snapshot or new.snapshot
    if snapshot:
        keys = old.stack.keys() & new.stack.keys()
        notes = ("a snapshot is involved: keys recorded on one side only are skipped",)
    toolkit: list[FieldChange] = []
    stack: list[FieldChange] = []
    for key in sorted(keys, key=_stack_order):
        before, after = old.stack.get(key), new.stack.get(key)
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


def _show_hash(value: Any) -> str:
    return str(value)[:12]


def _python_fits(a: Any, b: Any) -> bool:
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
