"""Real packs for tests: written by the pack writer from the real recorded wheels in
tests/data/install/ and the stacklock wheel made from this checkout."""

from __future__ import annotations

import hashlib
from pathlib import Path

from stacklock.lock import load_lock, wheel_sha256
from stacklock.pack.tools import make_self_wheel
from stacklock.pack.writer import PackItem, _write
from tests.helpers.data import DATA

INSTALL = DATA / "install"
SMALL_LOCK = INSTALL / "pylock.small.toml"
HEAD = {"stacklock": "0.1.0", "python": "3.11", "platform": "linux_x86_64",
        "glibc": None, "toolkit": None}


def small_pack_items(*, drop: str | None = None
                     ) -> list[tuple[PackItem, Path | None]]:
    """The lock, one wheel per package (all but ``drop``'s), and stacklock."""
    lock = load_lock(SMALL_LOCK)
    raw = SMALL_LOCK.read_bytes()
    items: list[tuple[PackItem, Path | None]] = [(PackItem(
        path=f"lock/{SMALL_LOCK.name}", kind="lock", data=raw, size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest()), None)]
    for pkg in lock.packages:
        if pkg.name == drop:
            continue
        wheel = pkg.wheels[0]
        items.append((PackItem(path=f"wheels/{wheel.filename}", kind="wheel",
                               sha256=str(wheel_sha256(wheel)), size=wheel.size),
                      INSTALL / "wheels" / wheel.filename))
    name, data = make_self_wheel()
    items.append((PackItem(path=f"tools/{name}", kind="tool", data=data,
                           size=len(data), sha256=hashlib.sha256(data).hexdigest()),
                  None))
    return items


def write_small_pack(path: Path, *, drop: str | None = None,
                     python: str = HEAD["python"]) -> Path:
    """A pack of tests/data/install/pylock.small.toml at ``path``, for a node of
    Python ``python`` (its wheels are pure Python)."""
    items = small_pack_items(drop=drop)
    with path.open("wb") as fh:
        _write(fh, items, {**HEAD, "python": python,
                           "lock_sha256": items[0][0].sha256})
    return path
