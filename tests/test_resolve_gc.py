"""few_collections: the cycle collector's setting is restored, and a frozen
resolution is thawed by the next call, so at most one resolution's cycles wait."""

from __future__ import annotations

import gc

import pytest

from stacklock.resolve.source import GC_THRESHOLD, few_collections


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_threshold_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with few_collections():
        assert gc.get_threshold()[0] >= GC_THRESHOLD
    assert gc.get_threshold() == before


def test_freeze_holds_cycles_until_the_next_call_thaws_them() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    with few_collections(freeze=True):
        _Cycle()  # garbage only the cycle collector can free
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() > 0
    with few_collections():
        assert gc.get_freeze_count() == 0  # thawed: collectable again
    assert gc.collect() > 0


def test_nothing_frozen_when_the_block_fails() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), few_collections(freeze=True):
        raise RuntimeError("no resolution")
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
