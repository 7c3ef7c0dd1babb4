"""Compare two locks package by package; see :mod:`stacklock.diff`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.utils import BuildTag, InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from stacklock.diff.packages import ComparedPackage, paired_packages
from stacklock.diff.stack import (
    FieldChange,
    diff_stack,
    read_warnings,
    toolkit_warnings,
)
from stacklock.errors import LockError
from stacklock.lock import load_lock

if TYPE_CHECKING:
    from pathlib import Path

    from packaging.tags import Tag

    from stacklock.lock import Lock

__all__ = [
    "CHANGE_KINDS",
    "LockDiff",
    "PackageChange",
    "PatchChange",
    "diff_lock_files",
    "diff_locks",
]

CHANGE_KINDS = (
    "added",
    "removed",
    "upgraded",
    "downgraded",
    "rebuilt",
    "replaced",
    "moved-index",
    "hash-changed",
    "marker-changed",
    "patched",
)


@dataclass(frozen=True, kw_only=True)
class PatchChange:
    """A patch of the profile's ``[[patches]]`` added, removed or changed (its
    file's sha256) on a package; ``file`` is the patch file's name."""

    change: str  # "added" | "removed" | "changed"
    file: str
    old_sha256: str | None
    new_sha256: str | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"change": self.change, "file": self.file,
                "old_sha256": self.old_sha256, "new_sha256": self.new_sha256,
                "reason": self.reason}

    def text(self) -> str:
        if self.change == "changed":
            return (f"patch {self.file} changed ({_short_hex(self.old_sha256)} -> "
                    f"{_short_hex(self.new_sha256)}): {self.reason}")
        return f"patch {self.file} {self.change}: {self.reason}"


def _short_hex(digest: str | None) -> str:
    return (digest or "")[:12]


@dataclass(frozen=True, kw_only=True)
class PackageChange:
    """One package that differs; ``index`` and ``hash`` are set whenever that
    aspect changed, whatever ``change`` (the most telling aspect) says."""

    name: str
    change: str
    old: str | None
    new: str | None
    index: tuple[str | None, str | None] | None = None
    cuda: tuple[str | None, str | None] | None = None
    hash: tuple[str, str, str] | None = None  # filename, old, new ("algo:digest")
    detail: str | None = None
    patches: tuple[PatchChange, ...] = ()  # its patches added, removed, changed

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "change": self.change.replace("-", "_"),
            "old": self.old,
            "new": self.new,
            "index": _pair(self.index),
            "cuda": _pair(self.cuda),
            "hash": None
            if self.hash is None
            else {"file": self.hash[0], "old": self.hash[1], "new": self.hash[2]},
            "detail": self.detail,
            "patches": [p.to_dict() for p in self.patches],
        }


@dataclass(frozen=True, kw_only=True)
class LockDiff:
    """Everything two locks disagree on; ``differs`` drives ``--exit-code``."""

    old_path: str
    new_path: str
    packages: tuple[PackageChange, ...]
    toolkit: tuple[FieldChange, ...]
    stack: tuple[FieldChange, ...]
    unchanged: int
    old_count: int
    new_count: int
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        return bool(self.packages or self.toolkit or self.stack)

    def summary(self) -> dict[str, Any]:
        """The counts: ``changes`` each changed package once, by its ``change``
        (snake_case, as in the JSON); ``aspects`` every package whose index,
        CUDA or file hash changed, whatever its ``change`` says."""
        kinds = Counter(p.change for p in self.packages)
        return {
            "changes": {k.replace("-", "_"): kinds.get(k, 0) for k in CHANGE_KINDS},
            "aspects": {"index": sum(p.index is not None for p in self.packages),
                        "cuda": sum(p.cuda is not None for p in self.packages),
                        "hash": sum(p.hash is not None for p in self.packages),
                        "patches": sum(bool(p.patches) for p in self.packages)},
            "unchanged": self.unchanged,
            "toolkit_fields": len(self.toolkit),
            "stack_fields": len(self.stack),
            "old_packages": self.old_count,
            "new_packages": self.new_count,
            "differs": self.differs,
        }

    def to_dict(self) -> dict[str, object]:
        return {
            "old": self.old_path,
            "new": self.new_path,
            "packages": [p.to_dict() for p in self.packages],
            "toolkit": {f.key: {"old": f.old, "new": f.new} for f in self.toolkit},
            "stack": {f.key: {"old": f.old, "new": f.new} for f in self.stack},
            "summary": self.summary(),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def _pair(value: tuple[str | None, str | None] | None) -> dict[str, str | None] | None:
    return None if value is None else {"old": value[0], "new": value[1]}


# -- comparing -------------------------------------------------------------------


def diff_lock_files(old: str | Path, new: str | Path) -> LockDiff:
    """Load both locks (strictly) and diff them; the CLI's single call."""
    return diff_locks(load_lock(old), load_lock(new))


def diff_locks(old: Lock, new: Lock) -> LockDiff:
    """Pure: compare two locks package by package, then their stack tables."""
    changes: list[PackageChange] = []
    unchanged = 0
    warnings: list[str] = [*read_warnings(old), *read_warnings(new)]
    pairs = paired_packages(old, new)
    for key, before, after in pairs:
        change = _diff_package(key, before, after)
        if change is None:
            unchanged += 1
            continue
        changes.append(change)
        if change.hash is not None:
            warnings.append(_hash_warning(key, change))
    toolkit, stack, notes = diff_stack(old, new)
    warnings += toolkit_warnings(toolkit)
    return LockDiff(
        old_path=old.path,
        new_path=new.path,
        packages=tuple(changes),
        toolkit=toolkit,
        stack=stack,
        unchanged=unchanged,
        old_count=len(old.packages),
        new_count=len(new.packages),
        notes=notes,
        warnings=tuple(warnings),
    )


_RECORD = "RECORD"  # the file name a snapshot's installed-files fingerprint stands for


def _hash_warning(key: str, change: PackageChange) -> str:
    assert change.hash is not None
    filename, was, now = change.hash
    moved = f"{_short(was)} -> {_short(now)}"
    if filename == _RECORD:
        return (
            f"{key} {change.new}: its installed files changed in place (RECORD "
            f"{moved}) at the same version: reinstalled from another build or "
            "edited: reinstall from the lock"
        )
    return (
        f"{key} {change.new}: {filename} changed its hash at the same version and "
        f"filename ({moved}); the file was replaced upstream or tampered with: "
        "verify it before installing"
    )


def _short(hash_text: str) -> str:
    algo, _, digest = hash_text.partition(":")
    return f"{algo}:{digest[:12]}"


def _show_version(view: ComparedPackage) -> str | None:
    return str(view.version) if view.version is not None else view.source


def _diff_package(
    key: str, old: ComparedPackage | None, new: ComparedPackage | None
) -> PackageChange | None:
    if old is None or new is None:
        only = new if old is None else old
        assert only is not None
        version = _show_version(only)
        return PackageChange(
            name=key,
            change="added" if old is None else "removed",
            old=None if old is None else version,
            new=version if old is None else None,
            cuda=None if only.cuda is None else _side_pair(old, new, only.cuda),
            patches=_patch_changes(() if old is None else old.patches,
                                   () if new is None else new.patches),
        )
    kind, detail = _version_change(old, new)
    index = None
    if old.index != new.index and _index_moved(old, new):
        index = (old.index, new.index)
        kind = kind or "moved-index"
    hash_change = _hash_change(old, new)
    if hash_change is not None:
        kind = kind or "hash-changed"
    if old.marker != new.marker:
        kind = kind or "marker-changed"
        moved = f"marker {old.marker or '(none)'} -> {new.marker or '(none)'}"
        detail = f"{detail}; {moved}" if detail else moved
    patches = _patch_changes(old.patches, new.patches)
    if patches:
        kind = kind or "patched"
    if kind is None:
        return None
    return PackageChange(
        name=key,
        change=kind,
        old=_show_version(old),
        new=_show_version(new),
        index=index,
        cuda=(old.cuda, new.cuda) if old.cuda != new.cuda else None,
        hash=hash_change,
        detail=detail,
        patches=patches,
    )


def _patch_changes(old: tuple[tuple[str, str, str], ...],
                   new: tuple[tuple[str, str, str], ...]) -> tuple[PatchChange, ...]:
    """The patches of one package added, removed or changed, paired by the
    patch file's name (the locks may sit in different folders)."""
    before = {name: (sha, reason) for name, sha, reason in old}
    after = {name: (sha, reason) for name, sha, reason in new}
    out = []
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        if was is not None and now is not None and was[0] == now[0]:
            continue
        change = "added" if was is None else "removed" if now is None else "changed"
        out.append(PatchChange(change=change, file=name,
                               old_sha256=was[0] if was else None,
                               new_sha256=now[0] if now else None,
                               reason=(now or was or ("", ""))[1]))
    return tuple(out)


def _side_pair(
    old: ComparedPackage | None, new: ComparedPackage | None, value: str
) -> tuple[str | None, str | None]:
    return (None, value) if old is None else (value, None)


def _version_change(
    old: ComparedPackage, new: ComparedPackage
) -> tuple[str | None, str | None]:
    a, b = old.version, new.version
    if old.source is not None or new.source is not None:  # compared by source
        if old.source == new.source:
            return None, None
        return "replaced", f"{old.source or a} -> {new.source or b}"
    if a is None or b is None:
        return "replaced", None
    if Version(a.public) != Version(b.public):  # 3.20 is 3.20.0 (PEP 440)
        return ("upgraded" if b > a else "downgraded"), None
    if a.local != b.local:
        return "rebuilt", f"local {a.local or '(none)'} -> {b.local or '(none)'}"
    return _build_change(old, new)


def _build_change(
    old: ComparedPackage, new: ComparedPackage
) -> tuple[str | None, str | None]:
    """Same version: a wheel for the same tags under another build tag is a rebuild."""
    if old.files.keys() == new.files.keys():
        return None, None
    before = _builds_by_tags(old)
    after = _builds_by_tags(new)
    for tags in sorted(before.keys() & after.keys(), key=lambda t: sorted(map(str, t))):
        if before[tags] != after[tags]:
            return "rebuilt", (
                f"build tag {_build_text(before[tags])} -> {_build_text(after[tags])}"
            )
    return None, None


def _builds_by_tags(view: ComparedPackage) -> dict[frozenset[Tag], BuildTag]:
    out: dict[frozenset[Tag], BuildTag] = {}
    for filename in view.files:
        if not filename.endswith(".whl"):
            continue
        try:
            _, _, build, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename as exc:
            raise LockError(f"{view.key_path}: {filename!r}: {exc}") from exc
        out[tags] = build
    return out


def _build_text(build: BuildTag) -> str:
    return "".join(str(part) for part in build) or "(none)"


def _index_moved(old: ComparedPackage, new: ComparedPackage) -> bool:
    """Compare the most precise origin both sides record."""
    for attr in ("index_name", "index_url", "domain"):
        a, b = getattr(old, attr), getattr(new, attr)
        if a and b:
            return bool(a != b)
    return False


def _hash_change(
    old: ComparedPackage, new: ComparedPackage
) -> tuple[str, str, str] | None:
    for filename in sorted(old.files.keys() & new.files.keys()):
        before, after = old.files[filename], new.files[filename]
        common = sorted(before.keys() & after.keys())
        algo = "sha256" if "sha256" in common else (common[0] if common else None)
        if algo is not None and before[algo].lower() != after[algo].lower():
            return filename, f"{algo}:{before[algo]}", f"{algo}:{after[algo]}"
    same = old.version is not None and old.version == new.version
    if same and old.record and new.record and old.record != new.record:
        return _RECORD, f"sha256:{old.record}", f"sha256:{new.record}"
    return None
