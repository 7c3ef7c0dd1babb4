"""Replaying a resolution whose inputs have not changed.

A resolution is a function of its inputs: the profile, the code that resolves it,
the index pages it read and the METADATA of the files on them (cached by each
file's sha256, so fixed). After a lock is written, ``<cache>/resolutions/`` keeps
a record under the key of the first inputs: the sha256 of every page read, the
lock's bytes and the lines the command printed. The next ``stacklock resolve``
with the same key replays it (the same bytes, the same lines) when every one of
those pages is in the page cache with the same sha256 and still fresh (at any age
with ``--offline``): the resolver would read the same pages and give the same
answer. The existing lock at the output path is an input too (its pins are
preferred, :mod:`stacklock.resolve.preferences`): a record keeps the sha256 of
the lock its resolution started from, and is replayed when the file there is
still that one, or is the record's own lock (whose pins give it back), or when
``--upgrade`` ignores it. Anything else runs the resolver: a stale or changed
page, ``--refresh``, a changed profile (its files' bytes), another stacklock,
packaging or resolvelib, a page an index did not have, a local index (folders are
not cached pages), another lock at the output path.

This module imports no HTTP client and no resolver, so a replay starts fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from stacklock._fs import atomic_write_bytes, check_writable, publish_bytes
from stacklock._fs import cache_dir as default_cache_dir
from stacklock.bounded import parse_json
from stacklock.codestamp import code_stamp
from stacklock.index.cache import PageCache, is_fresh_header
from stacklock.index.local import is_local
from stacklock.profile import default_lock_path, load_profile

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from stacklock.profile import Profile

__all__ = ["MEMO_FORMAT", "Replay", "headline", "memo_key", "replay_lock",
           "store_record"]

# Bump when what a record holds, or what decides a key, changes.
MEMO_FORMAT = 2


def headline(packages: int, profile: str, seconds: float, lock: Path) -> str:
    """The first line ``stacklock resolve`` prints."""
    return f"locked {packages} packages for {profile} in {seconds:.1f} s -> {lock}"


@dataclass(frozen=True, kw_only=True)
class Replay:
    """A resolution replayed from its record: what the command prints."""

    lock: Path
    profile: str
    packages: int
    lines: tuple[str, ...]  # the lines after the headline
    native: dict[str, Any] | None
    seconds: float
    text: str = ""  # the lock's text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lock": str(self.lock), "packages": self.packages,
                               "seconds": round(self.seconds, 3), "replayed": True}
        if self.native is not None:
            out["native"] = self.native
        return out

    def render(self) -> str:
        return "\n".join([headline(self.packages, self.profile, self.seconds,
                                   self.lock), *self.lines])


def memo_key(profile: Profile, *, output: Path, check: bool,
             upgrade: bool = False, released: Sequence[str] = ()) -> str | None:
    """The key of a resolution's fixed inputs; None when it cannot be replayed
    (a profile not read from files, a local index, a direct reference: a
    branch or a folder changes without any page changing). ``upgrade`` and
    ``released`` (``--upgrade-package`` names) say which of the existing lock's
    pins it kept."""
    if not profile.sha256 or any(is_local(i.url) for i in profile.indexes) or any(
            r.url for r in profile.requirements.packages):
        return None
    env = {k: v for k, v in os.environ.items()
           if k.startswith("STACKLOCK_") and k != "STACKLOCK_CACHE_DIR"}
    inputs = {"format": MEMO_FORMAT, "profile": profile.sha256, "name": profile.name,
              "path": profile.path, "indexes": [i.to_dict() for i in profile.indexes],
              "output": str(output.resolve()), "check": check, "env": env,
              "upgrade": upgrade, "released": sorted(released),
              "code": code_stamp("packaging", "resolvelib")}
    if profile.patches:  # their bytes: a patch edited beside an unchanged profile
        inputs["patches"] = [s.patch.sha256 if s.patch else s.file
                             for s in profile.patches]
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _record_path(root: Path, key: str) -> Path:
    return root / "resolutions" / key[:2] / f"{key}.json"


def store_record(root: Path, key: str, *, pages: Mapping[str, str | None],
                 lock_text: str, packages: int, lines: list[str],
                 native: dict[str, Any] | None, seed: str | None = "") -> None:
    """Keep what a replay needs; nothing when a page was missing on its index
    (only a request could tell whether it still is). ``seed``: the sha256 of
    the lock the resolution started from ("" none, None: ignored)."""
    if any(sha is None for sha in pages.values()):
        return
    record = {"format": MEMO_FORMAT, "key": key, "seed": seed,
              "pages": dict(sorted(pages.items())),
              "lock": lock_text, "packages": packages, "lines": lines,
              "native": native}
    atomic_write_bytes(_record_path(root, key), json.dumps(record).encode(),
                       durable=False)


def _load_record(root: Path, key: str) -> dict[str, Any] | None:
    try:
        record = parse_json(_record_path(root, key).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != MEMO_FORMAT or \
            record.get("key") != key or not isinstance(record.get("pages"), dict) or \
            not isinstance(record.get("lock"), str) or \
            not isinstance(record.get("seed"), str | None):
        return None
    return record


def _same_start(record: dict[str, Any], current: bytes | None) -> bool:
    """Whether a resolution now would start from what the record's did: the
    lock there is the one it started from, or the one it wrote (its pins give
    the same lock back), or the record ignored the lock (``--upgrade``)."""
    seed: str | None = record["seed"]
    if seed is None:
        return True
    if current is None:
        return seed == ""
    lock: str = record["lock"]
    return current == lock.encode("utf-8") or \
        hashlib.sha256(current).hexdigest() == seed


def _pages_unchanged(root: Path, pages: dict[str, Any], *, offline: bool,
                     now: float) -> bool:
    cache = PageCache(root / "pages")
    for url, sha in pages.items():
        meta = cache.header(url)
        if meta is None or meta.get("sha256") != sha:
            return False
        if not offline and not is_fresh_header(meta, now):
            return False
    return True


def replay_lock(
    profile: str,
    *,
    output: str | Path | None = None,
    index_urls: Mapping[str, str] | None = None,
    offline: bool = False,
    refresh: bool = False,
    check: bool = True,
    upgrade: bool = False,
    upgrade_packages: Sequence[str] = (),
    write: bool = True,
    cache_dir: Path | None = None,
    clock: Callable[[], float] = time.time,
) -> Replay | None:
    """Write the lock of the last resolution of ``profile`` again (unless
    ``write`` is false) and say what it printed, if nothing it depends on has
    changed (see the module docstring); None: resolve it
    (:func:`stacklock.resolve.locking.lock_profile`)."""
    started = time.monotonic()
    if refresh:
        return None
    loaded = load_profile(profile)
    if index_urls:
        loaded = loaded.with_index_urls(dict(index_urls))
    path = Path(output) if output is not None else default_lock_path(loaded.name)
    released = sorted({canonicalize_name(n) for n in upgrade_packages})
    key = memo_key(loaded, output=path, check=check, upgrade=upgrade,
                   released=released)
    root = cache_dir or default_cache_dir()
    record = None if key is None else _load_record(root, key)
    if record is None:
        return None
    try:
        current: bytes | None = path.read_bytes()
    except OSError:
        current = None
    if not _same_start(record, current) or not _pages_unchanged(
            root, record["pages"], offline=offline, now=clock()):
        return None
    data = record["lock"].encode("utf-8")
    if write and current != data:
        check_writable(path, example=f"pylock.{loaded.name}.toml")
        publish_bytes(path, data, what="the lock")
    return Replay(lock=path, profile=loaded.name, packages=int(record["packages"]),
                  lines=tuple(record.get("lines") or ()), native=record.get("native"),
                  seconds=time.monotonic() - started, text=record["lock"])
