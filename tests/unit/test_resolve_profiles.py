"""The built-in profiles against real data: blackwell-cu130's overrides applied to
sglang 0.5.9's real METADATA (tests/data/resolve/mirror/, recorded from PyPI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from stacklock.metadata import parse_wheel_metadata
from stacklock.profile import list_profiles, load_profile
from stacklock.resolve.model import Candidate, iter_dependencies
from stacklock.resolve.rules import Rules

MIRROR = Path(__file__).resolve().parents[1] / "data" / "resolve" / "mirror"


def _sglang_requirements(profile_name: str, version: str = "0.5.9"):
    profile = load_profile(profile_name)
    meta = parse_wheel_metadata(
        (MIRROR / "sglang-0.5.9-pypi.METADATA").read_bytes(),
        "sglang-0.5.9-py3-none-any.whl")
    env = profile.target.marker_environment()
    spec = profile.requirements
    rules = Rules(environment=env, overrides=spec.overrides,
                  constraints=spec.constraints, prereleases=spec.prereleases)
    parent = Candidate(name=meta.name, version=Version(version))
    reqs = [rules.make(r, parent=parent)
            for r in iter_dependencies(meta.requires_dist, frozenset(), env)]
    return rules, parent, {r.name: r for r in reqs}, meta


def test_blackwell_cu130_overrides_replace_sglangs_cuda12_pins():
    rules, parent, reqs, meta = _sglang_requirements("blackwell-cu130")
    original = {r.name: str(r.specifier) for r in meta.requires_dist}
    assert original["torch"] == "==2.9.1"  # what sglang 0.5.9 really pins
    assert reqs["torch"].specifier == SpecifierSet("==2.11.0")
    assert reqs["torch"].overridden == "torch==2.9.1"
    assert reqs["flashinfer-python"].specifier == SpecifierSet("==0.6.4")
    assert reqs["flashinfer-cubin"].specifier == SpecifierSet("==0.6.4")
    # sgl-kernel==0.3.21 is kept: its pinned index serves 0.3.21+cu130, which a
    # public ==0.3.21 matches (tests/integration/test_resolve_indexes.py)
    assert reqs["sgl-kernel"].overridden is None
    applied = {(a.package, a.original, a.override) for a in rules.applied([parent])}
    assert applied == {
        ("sglang", "torch==2.9.1", "torch==2.11.0"),
        ("sglang", "torchaudio==2.9.1", "torchaudio==2.11.0"),
        ("sglang", "flashinfer_python==0.6.3", "flashinfer-python==0.6.4"),
        ("sglang", "flashinfer_cubin==0.6.3", "flashinfer-cubin==0.6.4"),
        ("sglang", "cuda-python==12.9", "cuda-python>=13.0"),
    }
    # a candidate the resolver did not keep does not count
    assert rules.applied([]) == []


def test_the_nightly_profile_has_a_floor_and_no_ceiling_on_torch():
    """The nightly index drops builds past its newest ~60: an upper bound would
    one day match nothing, a floor never does."""
    _, _, reqs, _ = _sglang_requirements("blackwell-cu130-nightly")
    spec = reqs["torch"].specifier
    assert {s.operator for s in spec} == {">="}
    assert spec.contains(Version("2.16.0.dev20261202+cu130"), prereleases=True)
    assert spec.contains(Version("3.0.0.dev20300101+cu130"), prereleases=True)


def test_sglang_markers_are_those_of_the_linux_x86_64_target():
    _, _, reqs, meta = _sglang_requirements("blackwell-cu128")
    marked = {r.name for r in meta.requires_dist if r.marker is not None
              and "extra" not in str(r.marker)}
    assert {"av", "torchcodec"} <= marked
    assert "torchcodec" in reqs  # not aarch64
    assert "av" not in reqs      # aarch64 only
    assert not any(n in reqs for n in ("diffusers", "pytest"))  # extras only


@pytest.mark.parametrize("name", list_profiles())
def test_builtin_profile_is_consistent(name):
    profile = load_profile(name)
    spec = profile.requirements
    pinned = {p for index in profile.indexes for p in index.packages}
    assert pinned <= {r.name for r in spec.packages} | {
        "torchvision", "torchaudio", "pytorch-triton"}
    for req in spec.overrides:
        assert req.marker is None
    if profile.cuda.source == "runfile":
        assert profile.cuda.toolkit is not None
