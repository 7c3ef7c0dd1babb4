"""render_lock writes the packages itself: byte for byte what tomlkit alone
writes, on every committed lock and on packages of every shape a lock holds
(no/one/many dependencies, cuda, no size or upload time, several wheels, values
that need escaping, times with and without microseconds)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from stacklock._lock_toml import render_packages
from stacklock.lock import (
    Lock,
    LockedPackage,
    LockWheel,
    _render_with_tomlkit,
    load_lock,
    render_lock,
)

LOCKS = sorted((Path(__file__).parents[1] / "locks").glob("pylock.*.toml"))


def _both(lock: Lock) -> tuple[str, str]:
    return render_lock(lock), _render_with_tomlkit(lock, lock.to_dict())


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_committed_locks_render_as_tomlkit_renders_them(path: Path) -> None:
    lock = load_lock(path)
    fast, slow = _both(lock)
    assert fast == slow == path.read_text()
    assert render_packages(lock.to_dict()["packages"]) is not None  # fast path


def _wheel(name: str, **kw: object) -> LockWheel:
    base: dict[str, object] = {
        "name": name, "url": f"https://files.example.org/{name}", "sha256": "ab" * 32}
    return LockWheel(**{**base, **kw})  # type: ignore[arg-type]


def test_every_package_shape_renders_as_tomlkit_renders_it() -> None:
    lock = load_lock(LOCKS[0])
    odd = [
        LockedPackage(name="a", version="1.0", index="https://pypi.org/simple",
                      wheels=(_wheel("a-1.0-py3-none-any.whl"),)),
        LockedPackage(name="b", version="2.0+cu130", index="https://x.example/whl",
                      dependencies=("a",), cuda="13.0", hash_source="download",
                      index_name="nightly",
                      wheels=(_wheel("b-2.0+cu130-py3-none-any.whl", size=12,
                                     upload_time=datetime(2026, 2, 14, 8, 0,
                                                          tzinfo=timezone.utc)),)),
        LockedPackage(name="c", version="3", index='https://h.example/"q"\\ü',
                      dependencies=("a", "b"), index_name='quote"d',
                      wheels=(_wheel("c-3-py3-none-any.whl", upload_time=datetime(
                          2026, 2, 14, 8, 0, 1, 5, tzinfo=timezone.utc)),
                              _wheel("c-3-py2.py3-none-any.whl", size=0,
                                     url="https://files.example.org/ü\tc.whl"))),
    ]
    lock = replace(lock, packages=tuple(odd))
    fast, slow = _both(lock)
    assert fast == slow
    assert '"https://h.example/\\"q\\"\\\\ü"' in fast  # escaped the tomlkit way


def test_no_packages_goes_through_tomlkit_whole() -> None:
    lock = replace(load_lock(LOCKS[0]), packages=())
    assert render_packages([]) is None
    fast, slow = _both(lock)
    assert fast == slow
