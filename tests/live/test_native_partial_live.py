"""Live: the facts read in part equal a whole read's, field for field, on every
wheel of ``pypi-cu130``'s lock and of the everyday requirement sets.

For each lock the native check runs twice, each with an empty cache: reading the
larger members from their head, tail and dynamic segment (the default,
native.partial), and reading every member whole (``WheelReader(partial=None)``).
Each wheel's facts (its files; each object's DT_NEEDED, SONAME, run paths, strong
undefined and exported symbols; the large members left unread) must be equal, for
the members the check read and, by a read after it, for every wheel of the lock.
The everyday sets (scripts/resolve_sets.toml) are resolved first, without the
check, for CPython 3.12 on x86_64 manylinux_2_28. Reads about 1.2 GB of wheels
whole, a fifth of that in part.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from scripts._sets import profile_text
from stacklock.http import make_http_client
from stacklock.lock import load_lock
from stacklock.native import check_native
from stacklock.native.lockcheck import wheels_of
from stacklock.native.partial import PARTIAL_MIN
from stacklock.native.wheel import NativeWheel, WheelNatives, WheelReader
from stacklock.resolve.locking import lock_profile
from stacklock.target import Target

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
EVERYDAY = tomllib.loads((REPO / "scripts" / "resolve_sets.toml").read_text())[
    "everyday"]


def _facts(wheels: list[NativeWheel], cache: Path, *, partial: bool,
           target: Target) -> dict[str, WheelNatives]:
    with make_http_client() as http:
        reader = WheelReader(http, cache_dir=cache,
                             partial=PARTIAL_MIN if partial else None)
        check_native(wheels, reader=reader, manylinux=target.manylinux,
                     platform=target.platform, python=target.python)
        return {w.sha256: reader.read(w) for w in wheels}


def _compare(lock: Path, tmp_path: Path) -> None:
    loaded = load_lock(lock)
    target = loaded.target or Target()
    wheels = wheels_of(loaded)
    whole = _facts(wheels, tmp_path / "whole", partial=False, target=target)
    parts = _facts(wheels, tmp_path / "parts", partial=True, target=target)
    for wheel in wheels:
        assert parts[wheel.sha256] == whole[wheel.sha256], wheel.filename


def test_every_wheel_of_pypi_cu130_has_the_same_facts_read_in_part(tmp_path):
    _compare(REPO / "locks" / "pylock.pypi-cu130.toml", tmp_path)


@pytest.mark.parametrize("name", sorted(EVERYDAY))
def test_every_wheel_of_an_everyday_set_has_the_same_facts_read_in_part(
        name, tmp_path):
    profile = tmp_path / f"{name}.toml"
    profile.write_text(profile_text(EVERYDAY[name]), "utf-8")
    lock = tmp_path / f"pylock.{name}.toml"
    lock_profile(str(profile), output=lock, cache_dir=tmp_path / "resolve",
                 check=False)
    _compare(lock, tmp_path)
