"""``stacklock check LOCK``: the native check of a written lock.

Reads any PEP 751 lock through the one lock reader; the target, the reviewed
``allow`` list, ``strict`` and the ``[validate] imports`` (imported too, when a
finding's module is judged) come from its ``[tool.stacklock]`` table (a lock
without one is checked for the default target, manylinux_2_28 x86_64, CPython
3.12).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.lock import Lock, load_lock, wheel_sha256
from stacklock.native import (
    NativeReport,
    NativeWheel,
    SourceReader,
    WheelReader,
    check_native,
)
from stacklock.native.partial import PARTIAL_MIN
from stacklock.target import Target

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import httpx

__all__ = ["check_lock_file", "wheels_of"]


def wheels_of(lock: Lock) -> list[NativeWheel]:
    """Every wheel of the lock that has a URL and a sha256."""
    out = []
    for package in lock.packages:
        for wheel in package.wheels:
            sha256 = wheel_sha256(wheel)
            if wheel.url is None or sha256 is None:
                continue
            out.append(NativeWheel(
                package=str(package.name), version=str(package.version or ""),
                filename=wheel.filename, url=wheel.url, sha256=sha256,
                size=wheel.size,
            ))
    return out


def check_lock_file(
    path: str | Path,
    *,
    http: httpx.Client,
    cache_dir: Path,
    offline: bool = False,
    on_wheel: Callable[[NativeWheel], None] | None = None,
    partial: bool = True,
) -> NativeReport:
    """``partial``: read larger members in part (False: every member whole,
    for a comparison)."""
    lock = load_lock(path)
    target = lock.target or Target()
    stack = lock.stack
    allow = stack.check_allow if stack is not None else ()
    validate = stack.validate if stack is not None and stack.validate else {}
    imports = validate.get("imports", ())
    reader = WheelReader(http, cache_dir=cache_dir, offline=offline,
                         partial=PARTIAL_MIN if partial else None)
    return check_native(
        wheels_of(lock), reader=reader, manylinux=target.manylinux,
        platform=target.platform, python=target.python, allow=allow,
        on_wheel=on_wheel,
        sources=SourceReader(http, cache_dir=cache_dir, offline=offline),
        imports=tuple(str(m) for m in imports) if isinstance(imports, list | tuple)
        else (), strict=stack.check_strict if stack is not None else False,
    )
