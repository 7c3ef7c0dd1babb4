"""few_collections: the cycle collector runs rarely inside, and its setting is
restored after, also when the resolution fails."""

from __future__ import annotations

import gc

import pytest

from stacklock.resolve.source import GC_THRESHOLD, few_collections


def test_threshold_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with few_collections():
        assert gc.get_threshold()[0] >= GC_THRESHOLD
    assert gc.get_threshold() == before


def test_threshold_restored_when_the_block_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), few_collections():
        assert gc.get_threshold()[0] >= GC_THRESHOLD
        raise RuntimeError("no resolution")
    assert gc.get_threshold() == before


def test_cli_resolves_without_the_collector_and_gives_it_back(tmp_path,
                                                             monkeypatch) -> None:
    from stacklock.cli import main
    from stacklock.errors import ResolutionError
    from stacklock.resolve import locking

    seen: list[bool] = []

    def resolution(*args: object, **kwargs: object) -> None:
        seen.append(gc.isenabled())
        raise ResolutionError("nothing fits")

    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(locking, "lock_profile", resolution)
    assert gc.isenabled()
    assert main(["resolve", "pypi-small", "-o", str(tmp_path / "lock.toml")]) == 1
    assert seen == [False]
    assert gc.isenabled()
