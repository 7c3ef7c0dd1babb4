"""Groups of a real CUDA upgrade, from the wheels' own METADATA (recorded from
PyPI by scripts/record_bisect_metadata.py into tests/data/bisect/): the two real
uv locks of tests/data/diff/, SGLang 0.5.9 on torch 2.9.1 (CUDA 12.8) and on
torch 2.11.0 (CUDA 13). Read offline, as a bisect on a node with a warm cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from stacklock.bisect.changes import TOOLKIT, Change
from stacklock.bisect.mix import make_mix
from stacklock.bisect.requirements import RequirementReader
from stacklock.bisect.run import group_locks
from stacklock.cli.bisect import _changes
from stacklock.lock import load_lock
from stacklock.metadata.fetch import MetadataFetcher
from stacklock.target import Target
from tests.helpers.data import DATA


@pytest.fixture
def graph(tmp_path: Path):
    shutil.copytree(DATA / "bisect" / "metadata", tmp_path / "metadata")
    good = load_lock(DATA / "diff" / "pylock.cu128.toml")
    bad = load_lock(DATA / "diff" / "pylock.cu130.toml")
    with httpx.Client() as http:
        fetcher = MetadataFetcher(http, cache_dir=tmp_path, offline=True)
        target = Target(python="3.12")
        yield group_locks(good, bad, _changes(good, bad),
                          RequirementReader(fetcher, good, target=target),
                          RequirementReader(fetcher, bad, target=target))


def _group(graph, name: str) -> set[str]:
    return next(set(g.names) for g in graph.groups if name in g.names)


def test_torch_travels_with_what_it_pins_and_what_pins_it(graph) -> None:
    torch = _group(graph, "torch")
    # torchvision and torchaudio pin torch==; torch pins triton and its nvidia
    # wheels == (cu12 names at 2.9.1, cu13 at 2.11.0), and at 2.11.0 asks
    # cuda-toolkit[cublas,...]==13.0.2, whose extras pin nvidia-cublas==13.1.0.3.*
    assert {"torchvision", "torchaudio", "triton", "cuda-toolkit",
            "nvidia-cublas-cu12", "nvidia-cublas", "nvidia-nccl-cu12",
            "nvidia-nccl-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"} <= torch
    assert all(n.startswith(("nvidia-", "torch", "triton", "cuda-toolkit"))
               for n in torch)
    ties = next(g.ties for g in graph.groups if "torch" in g.names)
    assert "torchvision 0.26.0 requires torch==2.11.0" in ties
    assert any(t.startswith("cuda-toolkit 13.0.2 requires nvidia-cublas==13.1.0.3.*")
               for t in ties)


def test_changes_nothing_pins_stay_apart(graph) -> None:
    changes = [c for g in graph.groups for c in g.changes]
    assert len(changes) == 42 and len(graph.groups) == 7
    assert _group(graph, "cuda-python") == {"cuda-python", "cuda-bindings"}  # ~=
    for alone in ("setuptools", "flashinfer-python", "compressed-tensors"):
        assert _group(graph, alone) == {alone}
    assert all(isinstance(c, Change) for c in changes)


def test_a_group_comes_after_what_it_needs(graph) -> None:
    labels = [g.label for g in graph.groups]
    for i, needs in enumerate(graph.needs):
        assert all(j < i for j in needs), (labels[i], needs)
    torch = next(i for i, g in enumerate(graph.groups) if "torch" in g.names)
    # torch 2.11.0 requires setuptools<82 (the downgrade 84.2.1 -> 81.0.0)
    assert labels.index("setuptools") in graph.needs[torch]


def test_the_toolkit_is_one_of_the_changes_and_moves_with_its_mix() -> None:
    """The committed locks: a 12.8.1 runfile toolkit, and 13.0.3 as
    ``source = "pypi"``; a mix takes the toolkit from BAD only when asked."""
    root = Path(__file__).resolve().parents[2] / "locks"
    good = load_lock(root / "pylock.blackwell-cu128.toml")
    bad = load_lock(root / "pylock.pypi-cu130.toml")
    toolkit = next(c for c in _changes(good, bad) if c.name == TOOLKIT)
    assert (toolkit.kind, toolkit.old, toolkit.new) == ("toolkit", "12.8.1", "13.0.3")
    kept = make_mix(good, bad, ["torch"], path="pylock.mix.toml")
    moved = make_mix(good, bad, ["torch", TOOLKIT], path="pylock.mix.toml")
    assert kept.cuda == good.cuda and moved.cuda == bad.cuda
    assert moved.package("torch") is bad.package("torch")
    assert good.package("numpy") is not None
    assert moved.package("numpy") is good.package("numpy")
