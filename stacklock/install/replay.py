"""A plan remembered: the same lock on the same interpreter plans the same.

Which packages apply, the wheel each installs from and uv's build flags
(:class:`~stacklock.install.plan.Choices`) depend only on the lock's bytes and
the interpreter; so do the target checks (python, platform, glibc, a wheel for
every package). An install that goes ahead remembers its choices under
``<cache>/install-plans/<key>.json``, the key hashing the lock's bytes, the
interpreter's identity (as the probe's cache keys it: path, inode, size, mtime,
kernel) and the code (:func:`stacklock.codestamp.code_stamp`: stacklock's files
and packaging's). The next install of that lock with that
interpreter replays them: it loads no lock model and no packaging, builds the
plan for its own generation from them, and runs the checks that read the machine
(space, access). On a warm install of a small stack that is most of stacklock's
own time.

Only plans uv carries alone are remembered: no toolkit, no CUDA (the driver
check reads the machine every time), no sdists, no file by ``path``, no patches
(their files are checked against the lock every time). A plan whose
wheel has reached the artifact store since (the plan would install it from
there) is not replayed. Validation, when asked for, reads the lock as always.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import TYPE_CHECKING

from stacklock._fs import atomic_write_bytes
from stacklock.bounded import parse_json
from stacklock.codestamp import code_stamp
from stacklock.install.early import NO_BUILD
from stacklock.install.interpreter import interpreter_key
from stacklock.install.plan import Choices, Download

if TYPE_CHECKING:
    from pathlib import Path

    from stacklock.install.plan import InstallPlan
    from stacklock.lock import Lock
    from stacklock.store import ArtifactStore

__all__ = ["recall", "remember", "replay_key"]

FORMAT = 1


def replay_key(content: bytes, python: str) -> str | None:
    """The key of a lock's bytes (as install read them, checked) with this
    interpreter; None when the interpreter cannot be stat'ed."""
    interp = interpreter_key(python)
    if interp is None:
        return None
    code = repr(code_stamp("packaging"))  # markers and tags decide the choices
    digest = hashlib.sha256()
    for part in (f"{FORMAT} {interp} {code}".encode(), content):
        digest.update(part)
    return digest.hexdigest()


def _entry(cache: Path, key: str) -> Path:
    return cache / "install-plans" / f"{key}.json"


def _download(item: object) -> Download | None:
    if not isinstance(item, dict):
        return None
    try:
        return Download(kind=str(item["kind"]), filename=str(item["filename"]),
                        url=str(item["url"]), size=item["size"],
                        sha256=str(item["sha256"]), cached=bool(item["cached"]))
    except KeyError:
        return None


def recall(key: str, *, cache: Path, store: ArtifactStore) -> Choices | None:
    """The choices remembered under ``key``, unless unreadable or one of their
    wheels is now in the artifact store."""
    try:
        data = parse_json(_entry(cache, key).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    downloads = [_download(d) for d in data.get("downloads", [])]
    packages = data.get("packages")
    if None in downloads or not isinstance(packages, list):
        return None
    if any(store.has(d.sha256) for d in downloads if d is not None):
        return None
    return Choices(packages=tuple((str(n), str(v)) for n, v in packages),
                   downloads=tuple(d for d in downloads if d is not None),
                   build=NO_BUILD)  # wheels only: nothing else is remembered


def replayable(plan: InstallPlan, lock: Lock) -> bool:
    """Does uv carry this plan alone (see the module doc)?"""
    return (
        plan.toolkit is None
        and lock.cuda is None
        and all(p.cuda is None for p in lock.packages)
        and (lock.stack is not None  # a foreign lock's CUDA is inferred each time
             or not any(p.name.startswith("nvidia-") or "+cu" in str(p.version)
                        for p in lock.packages))
        and not plan.local_wheels
        and all(d.kind == "wheel" and not d.cached for d in plan.downloads)
        and not any(f.path for p in lock.packages for f in p.files)
        and not any(p.tool.patches for p in lock.packages)  # files read each time
    )


def remember(key: str, plan: InstallPlan, lock: Lock, *, cache: Path) -> None:
    """Keep the plan's choices under ``key`` when it is replayable."""
    if not replayable(plan, lock):
        return
    data = {
        "format": FORMAT,
        "packages": [list(p) for p in plan.packages],
        "downloads": [
            {"kind": d.kind, "filename": d.filename, "url": d.url, "size": d.size,
             "sha256": d.sha256, "cached": d.cached}
            for d in plan.downloads
        ],
    }
    with contextlib.suppress(OSError):  # a cache that cannot be written: no replay
        atomic_write_bytes(_entry(cache, key), json.dumps(data).encode("utf-8"),
                           durable=False)
