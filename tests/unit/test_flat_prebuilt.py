"""Prebuilt wheels outside indexes: a real flat page of flash-attn GitHub release
assets (tests/data/flat/PROVENANCE.md), pinned for flash-attn, gives the wheel
for the target's CPython instead of PyPI's sdist."""

from __future__ import annotations

from pathlib import Path

import httpx

from stacklock.index.client import IndexClient
from stacklock.index.finder import Finder
from stacklock.profile import IndexSpec
from stacklock.target import Target

PAGE = (Path(__file__).resolve().parents[1] / "data" / "flat"
        / "flash-attn-cu12-torch2.8-cxx11abiTRUE.html")
FLASH = IndexSpec(name="flash-attn-cu12-torch2.8", url=str(PAGE), kind="flat",
                  packages=("flash-attn",))


def _finder(tmp_path: Path, python: str) -> Finder:
    # no transport is ever used: the page is a local file
    client = IndexClient(httpx.Client(transport=httpx.MockTransport(
        lambda request: httpx.Response(599))), cache_dir=tmp_path)
    return Finder(client, [FLASH], Target(python=python))


def test_the_release_asset_for_the_target_python_is_chosen(tmp_path: Path) -> None:
    found = _finder(tmp_path, "3.12").find_candidates("flash-attn")
    assert [ev.link.filename for ev in found] == [
        "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"]
    (best,) = found
    assert str(best.version) == "2.8.3+cu12torch2.8cxx11abitrue"
    assert best.link.url == (
        "https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3/"
        "flash_attn-2.8.3%2Bcu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    assert best.link.sha256 is None  # resolve downloads it once to hash it
    assert best.index == "flash-attn-cu12-torch2.8"


def test_every_other_asset_says_why_it_does_not_fit(tmp_path: Path) -> None:
    evaluations = _finder(tmp_path, "3.12").evaluate("flash-attn")
    reasons = {ev.link.filename.split("-")[2]: ev.reason for ev in evaluations}
    assert reasons["cp312"] is None
    assert reasons["cp313"] == ("no tag fits cp312/manylinux_2_28_x86_64: wheel has "
                                "cp313-cp313-linux_x86_64")
    assert len(evaluations) == 5


def test_a_python_the_release_does_not_cover_gets_nothing(tmp_path: Path) -> None:
    assert _finder(tmp_path, "3.14").find_candidates("flash-attn") == []
