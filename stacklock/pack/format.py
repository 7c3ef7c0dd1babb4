"""The pack file format, read with the standard library alone.

A pack is one file in two parts::

    [ POSIX tar (pax): the payload ]  lock/, wheels/, tools/, toolkit/: plain files,
                                      sorted, mtime 0, owner 0 (`tar tvf PACK` lists it)
    [ zip: the bootstrap ]            __main__.py, this module, boot.py, manifest.json

Python runs a file that ends in a zip archive (zipimport reads the directory at the
end and allows other data before it), so ``python3 PACK`` starts the bootstrap. The
payload sits in a tar in front rather than in the zip because zipimport reads no
ZIP64 before Python 3.13, and a CUDA stack is larger than 4 GiB. ``manifest.json``
gives every payload file's offset in the pack, size and sha256.

This module and ``boot.py`` travel inside every pack, so they import nothing outside
the standard library except ``stacklock.errors``, ``stacklock._fs`` and
``stacklock.bounded`` (all standard-library only, and copied alongside).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stacklock.bounded import parse_json
from stacklock.errors import PackError
from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

__all__ = [
    "FORMAT",
    "MANIFEST",
    "Manifest",
    "Member",
    "check_node",
    "check_space",
    "copy_member",
    "is_pack",
    "read_manifest",
    "render_listing",
    "scratch_dir",
]

FORMAT = 1
MANIFEST = "manifest.json"
KINDS = ("lock", "wheel", "tool", "runfile", "patch")
FOLDERS = {"lock": "lock", "wheel": "wheels", "tool": "tools", "runfile": "toolkit",
           "patch": "patches"}
_SHA256 = re.compile(r"[0-9a-f]{64}")
# a file name the pack may carry: no separator, no leading dot (so not . or ..)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,254}")
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)+")
_PLATFORM = re.compile(r"[a-z0-9_]{1,64}")
_CHUNK = 1 << 20
MAX_MANIFEST_BYTES = 16 << 20  # a pack of 1,000 files has a 0.2 MB manifest


@dataclass(frozen=True, kw_only=True)
class Member:
    """One payload file: its bytes start at ``offset`` in the pack."""

    path: str  # lock/pylock.<name>.toml, wheels/<wheel>, tools/<wheel>, toolkit/<run>
    kind: str  # one of KINDS
    size: int
    sha256: str
    offset: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "size": self.size,
                "sha256": self.sha256, "offset": self.offset}

    @classmethod
    def from_dict(cls, data: Any, where: str = "member") -> Member:
        """Every field checked before anything uses it: a manifest travels by
        hand and is hostile until proven otherwise. ``path`` is
        ``<folder of its kind>/<plain file name>``, ``sha256`` 64 lower-case hex
        digits (it names files in the store), ``size`` and ``offset`` whole
        numbers >= 0."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: not an object")
        unknown = sorted(set(data) - {"path", "kind", "size", "sha256", "offset"})
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r}")
        kind = _text(data, "kind", where)
        if kind not in KINDS:
            raise ValueError(f"{where}.kind: {kind!r} is not one of {', '.join(KINDS)}")
        path = _text(data, "path", where)
        folder, _, name = path.partition("/")
        if folder != FOLDERS[kind] or not _NAME.fullmatch(name):
            raise ValueError(
                f"{where}.path: {path!r} is not {FOLDERS[kind]}/<file name> (a "
                "plain name: letters, digits and ._+-, no folders)")
        sha256 = _text(data, "sha256", where)
        if not _SHA256.fullmatch(sha256):
            raise ValueError(f"{where}.sha256: {sha256[:80]!r} is not 64 lower-case "
                             "hex digits")
        return cls(path=path, kind=kind, size=_count(data, "size", where),
                   sha256=sha256, offset=_count(data, "offset", where))


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{where}.{key}: expected a string, found "
                         f"{type(value).__name__}")
    return value


def _count(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}.{key}: expected a whole number >= 0, found "
                         f"{value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """What a pack holds and which node it is for."""

    stacklock: str  # the version that made it
    lock_sha256: str
    python: str  # the target's "3.12"
    platform: str  # the target's "linux_x86_64"
    glibc: str | None  # the oldest glibc every wheel runs on, "2.28"
    toolkit: str | None  # CUDA version of the runfile carried, if any
    payload_size: int
    members: tuple[Member, ...]

    @property
    def lock(self) -> Member:
        return next(m for m in self.members if m.kind == "lock")

    def of_kind(self, kind: str) -> list[Member]:
        return [m for m in self.members if m.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "stacklock": self.stacklock,
                "lock-sha256": self.lock_sha256, "python": self.python,
                "platform": self.platform, "glibc": self.glibc,
                "toolkit": self.toolkit, "payload-size": self.payload_size,
                "members": [m.to_dict() for m in self.members]}

    def to_json(self, *, path: Path, size: int) -> dict[str, Any]:
        """``pack --list --json`` (``stacklock.pack-list/1``): the manifest's
        fields in the output's snake_case, with the pack's path and size."""
        return {"pack": str(path), "size": size, "format": FORMAT,
                "stacklock": self.stacklock, "lock_sha256": self.lock_sha256,
                "python": self.python, "platform": self.platform,
                "glibc": self.glibc, "toolkit": self.toolkit,
                "payload_size": self.payload_size,
                "members": [m.to_dict() for m in self.members]}

    @classmethod
    def from_dict(cls, data: Any) -> Manifest:
        """The manifest, every field checked (see :meth:`Member.from_dict`): one
        lock, unique paths, members that lie inside the payload one after the
        other without overlapping."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, this reader knows "
                             f"{FORMAT}")
        raw_members = data.get("members")
        if not isinstance(raw_members, list):
            raise ValueError("members: expected a list")
        members = tuple(Member.from_dict(m, f"members[{i}]")
                        for i, m in enumerate(raw_members))
        manifest = cls(
            stacklock=_text(data, "stacklock", "manifest"),
            lock_sha256=_text(data, "lock-sha256", "manifest"),
            python=_checked(data, "python", _VERSION),
            platform=_checked(data, "platform", _PLATFORM),
            glibc=_optional(data, "glibc", _VERSION),
            toolkit=_optional(data, "toolkit", _VERSION),
            payload_size=_count(data, "payload-size", "manifest"),
            members=members)
        locks = manifest.of_kind("lock")
        if len(locks) != 1 or locks[0].sha256 != manifest.lock_sha256:
            raise ValueError("exactly one lock, with the manifest's lock-sha256")
        paths = [m.path for m in members]
        if len(set(paths)) != len(paths):
            twice = sorted(p for p in set(paths) if paths.count(p) > 1)[0]
            raise ValueError(f"members: {twice} is listed twice")
        _check_spans(members, manifest.payload_size)
        return manifest


def _check_spans(members: tuple[Member, ...], payload_size: int) -> None:
    """Each member's bytes inside the payload, none overlapping another's; two
    members with the same sha256 may share one span (the writer stores equal
    files once)."""
    end = 0
    last: Member | None = None
    for i, member in sorted(enumerate(members), key=lambda im: im[1].offset):
        same = last is not None and (last.offset, last.size, last.sha256) == (
            member.offset, member.size, member.sha256)
        if (member.offset < end and not same) or \
                member.offset + member.size > payload_size:
            raise ValueError(
                f"members[{i}] ({member.path}): bytes {member.offset}.."
                f"{member.offset + member.size} overlap another member or lie "
                f"outside the {payload_size}-byte payload")
        end = max(end, member.offset + member.size)
        last = member


def _optional(data: Mapping[str, Any], key: str, pattern: re.Pattern[str]
              ) -> str | None:
    return None if data.get(key) is None else _checked(data, key, pattern)


def _checked(data: Mapping[str, Any], key: str, pattern: re.Pattern[str]) -> str:
    value = _text(data, key, "manifest")
    if not pattern.fullmatch(value):
        raise ValueError(f"{key}: {value[:80]!r} is not of the form a pack "
                         "carries")
    return value


def is_pack(path: str | os.PathLike[str]) -> bool:
    """Does ``path`` end in a zip that holds a pack manifest? (Never raises, and
    never opens anything but a regular file: a FIFO would block.)"""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with zipfile.ZipFile(path) as zf:
            return MANIFEST in zf.namelist() and "__main__.py" in zf.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """The manifest, after checking that the payload in front is whole."""
    pack = Path(path)
    try:
        with zipfile.ZipFile(pack) as zf:
            if zf.getinfo(MANIFEST).file_size > MAX_MANIFEST_BYTES:
                raise PackError(f"{pack}: {MANIFEST}: larger than "
                                f"{MAX_MANIFEST_BYTES >> 20} MiB",
                                hint="make the pack again with `stacklock pack`")
            with zf.open(MANIFEST) as fh:  # what the zip says it holds, no more
                raw = fh.read(MAX_MANIFEST_BYTES + 1)
            start = min(info.header_offset for info in zf.infolist())
    except FileNotFoundError:
        raise PackError(f"{pack}: no such file") from None
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise PackError(
            f"{pack}: not a stacklock pack, or its end is missing ({exc})",
            hint="copy it again and compare its sha256sum with the one `stacklock "
            "pack` printed") from None
    try:
        manifest = Manifest.from_dict(parse_json(raw))
    except ValueError as exc:  # Malformed is one, as are from_dict's
        raise PackError(f"{pack}: {MANIFEST}: {exc}",
                        hint="make the pack again with `stacklock pack`") from None
    ends = [m.offset + m.size for m in manifest.members]
    if start != manifest.payload_size or any(e > start for e in ends):
        raise PackError(
            f"{pack}: truncated or altered: the payload is {start} bytes, the "
            f"manifest says {manifest.payload_size}",
            hint="copy it again and compare its sha256sum with the packer's")
    return manifest


def _chunks(pack: Path, member: Member) -> Iterator[bytes]:
    with pack.open("rb") as fh:
        fh.seek(member.offset)
        left = member.size
        while left:
            chunk = fh.read(min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk


def copy_member(pack: Path, member: Member, dest: Path | None, *,
                progress: Callable[[int], None] | None = None) -> None:
    """Stream ``member`` to ``dest`` (None: only hash it), checking its sha256;
    a mismatch deletes ``dest`` and raises PackError."""
    digest = hashlib.sha256()
    size = 0
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(dest.open("wb")) if dest is not None else None
        for chunk in _chunks(pack, member):
            digest.update(chunk)
            size += len(chunk)
            if out is not None:
                out.write(chunk)
            if progress is not None:
                progress(len(chunk))
    actual = digest.hexdigest()
    if size != member.size or actual != member.sha256:
        if dest is not None:
            dest.unlink(missing_ok=True)
        raise PackError(
            f"{pack}: {member.path} was altered: sha256 {actual} ({size} bytes), the "
            f"manifest says {member.sha256} ({member.size} bytes); nothing installed",
            hint="make the pack again from the reviewed lock and copy it again")


def _glibc() -> tuple[int, int] | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    name, _, version = text.partition(" ")
    parts = version.split(".")
    if name != "glibc" or len(parts) < 2:
        return None
    return int(parts[0]), int(parts[1])


def check_node(manifest: Manifest, pack: Path, *,
               python: tuple[int, int] | None = None, machine: str | None = None,
               glibc: tuple[int, int] | None = None) -> None:
    """Refuse a pack made for another Python minor, machine or an older glibc."""
    have_python = python or (sys.version_info[0], sys.version_info[1])
    have_machine = machine or platform.machine()
    have_glibc = glibc or _glibc()
    want_machine = manifest.platform.split("_", 1)[-1]
    problems = []
    if ".".join(map(str, have_python)) != manifest.python:
        problems.append(f"Python {manifest.python} (this is "
                        f"{have_python[0]}.{have_python[1]})")
    if have_machine != want_machine:
        problems.append(f"{want_machine} (this is {have_machine})")
    if manifest.glibc:
        want = tuple(int(p) for p in manifest.glibc.split("."))
        if have_glibc is None or have_glibc < want:
            seen = ".".join(map(str, have_glibc)) if have_glibc else "none"
            problems.append(f"glibc >= {manifest.glibc} (this has {seen})")
    if problems:
        raise PackError(
            f"{pack}: made for {', '.join(problems)}; nothing changed",
            hint=f"run it with a python{manifest.python} on a matching node, or "
            "pack a lock resolved for this one")


def _existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists():
        path = path.parent
    return path


def check_space(needs: Mapping[Path, int], pack: Path) -> None:
    """``needs``: bytes to be written under each path (one check per file system)."""
    by_device: dict[int, tuple[Path, int]] = {}
    for path, size in needs.items():
        base = _existing(path)
        dev = base.stat().st_dev
        seen = by_device.get(dev, (base, 0))
        by_device[dev] = (seen[0], seen[1] + size)
    for base, size in by_device.values():
        free = shutil.disk_usage(base).free
        if free < size:
            raise PackError(
                f"{pack}: {base} has {free / 1e9:.2f} GB free, about "
                f"{size / 1e9:.2f} GB is needed to unpack and install; nothing "
                "changed", hint="free space, or set STACKLOCK_CACHE_DIR and --venv "
                "to a larger disk")


@contextlib.contextmanager
def scratch_dir(parent: Path) -> Iterator[Path]:
    """A temporary folder under ``parent``; on exit it is removed, with every
    parent folder this call had to create."""
    parent = Path(os.path.abspath(parent))
    made = []
    probe = parent
    while not probe.exists():
        made.append(probe)
        probe = probe.parent
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="pack-", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def render_listing(manifest: Manifest, pack: Path, total: int) -> str:
    """What the person carrying the pack wants to know: target, contents, sizes."""
    glibc = f", glibc >= {manifest.glibc}" if manifest.glibc else ""
    lines = [f"{pack.name}: {_size(total)}, made by stacklock {manifest.stacklock}",
             f"target: Python {manifest.python}, {manifest.platform}{glibc}",
             f"lock: {manifest.lock.name} sha256 {manifest.lock_sha256}"]
    titles = {"wheel": "wheels of the lock", "tool": "stacklock and uv (bootstrap)",
              "runfile": f"CUDA {manifest.toolkit} toolkit runfile",
              "patch": "patches of the lock ([[patches]])"}
    for kind, title in titles.items():
        members = manifest.of_kind(kind)
        if not members:
            continue
        size = sum(m.size for m in members)
        lines.append(f"{title}: {counted(len(members), 'file')}, {_size(size)}")
        lines += [f"  {m.name}  {_size(m.size)}  sha256 {m.sha256}" for m in members]
    lines.append(f"run: python3 {pack.name} install --venv PATH [--toolkit-prefix "
                 "PATH] [--report DIR]")
    return "\n".join(lines)
