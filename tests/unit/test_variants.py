"""GPU-architecture variants chosen against flashinfer's real cu130 index pages
(tests/data/real/flashinfer-ai-whl-cu130/, served as a local index folder).

Expectations are read from the pages with a regex and packaging, independently
of stacklock's parsers."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from stacklock.errors import ProfileError
from stacklock.index.client import IndexClient
from stacklock.index.finder import Finder
from stacklock.profile import IndexSpec, RequirementsSpec, parse_profile
from stacklock.resolve.variant_choice import choose_variants, pin_variants
from stacklock.variants import parse_gpu_variants
from tests.helpers.data import REAL

CU130 = REAL / "flashinfer-ai-whl-cu130" / "cu130"
DECLARED = parse_gpu_variants({"flashinfer-jit-cache": {
    "sm_90": "flashinfer-jit-cache-sm90a",
    "sm_100": "flashinfer-jit-cache-sm100a",
    "sm_120": "flashinfer-jit-cache-sm120f",
}}, None)
INDEX = IndexSpec(name="flashinfer-cu130", url=str(CU130),
                  packages=("flashinfer-jit-cache",))


def _page_versions(project: str) -> list[Version]:
    """x86_64 wheel versions on the real page, by regex."""
    html = (CU130 / project / "index.html").read_text()
    names = re.findall(r">([^<>]+x86_64\.whl)</a>", html)
    return [parse_wheel_filename(n)[1] for n in names]


def _choose(tmp_path: Path, packages: list[str], gpu_arch: list[str],
            prereleases: frozenset[str] = frozenset()):
    profile = parse_profile({
        "target": {"gpu-arch": gpu_arch},
        "index": [INDEX.to_dict()],
        "requirements": {"packages": packages, "prereleases": sorted(prereleases)},
        "gpu-variants": {d.project: d.to_dict() for d in DECLARED},
    }, name="t")
    pinned = pin_variants(profile)
    with httpx.Client() as http:
        finder = Finder(IndexClient(http, cache_dir=tmp_path), pinned.indexes,
                        pinned.target)
        return choose_variants(pinned.requirements, pinned.gpu_variants,
                               pinned.target.gpu_arch, finder)


def test_sm_120_takes_the_sm120f_project_when_it_has_a_fitting_version(tmp_path):
    spec, (choice,) = _choose(tmp_path, ["flashinfer-jit-cache>=0.7"], ["sm_120"])
    fitting = [v for v in _page_versions("flashinfer-jit-cache-sm120f")
               if SpecifierSet(">=0.7").contains(v)]
    assert fitting  # the real page has 0.7.x builds for sm_120
    assert choice.chosen == "flashinfer-jit-cache-sm120f"
    assert [str(r) for r in spec.packages] == ["flashinfer-jit-cache-sm120f>=0.7"]
    assert str(max(fitting)) in choice.reason and "sm_120" in choice.reason


def test_sm_90_takes_sm90a(tmp_path):
    spec, (choice,) = _choose(tmp_path, ["flashinfer-jit-cache==0.7.0"], ["sm_90"])
    assert Version("0.7.0+cu130") in _page_versions("flashinfer-jit-cache-sm90a")
    assert choice.chosen == "flashinfer-jit-cache-sm90a"
    assert [r.name for r in spec.packages] == ["flashinfer-jit-cache-sm90a"]


def test_no_fitting_per_arch_version_keeps_the_generic_project(tmp_path):
    """0.6.4 (the version blackwell-cu130 locks) is only on the generic page."""
    spec, (choice,) = _choose(tmp_path, ["flashinfer-jit-cache==0.6.4"], ["sm_120"])
    assert Version("0.6.4+cu130") in _page_versions("flashinfer-jit-cache")
    assert not any(SpecifierSet("==0.6.4").contains(v)
                   for v in _page_versions("flashinfer-jit-cache-sm120f"))
    assert choice.chosen == "flashinfer-jit-cache"
    assert [str(r) for r in spec.packages] == ["flashinfer-jit-cache==0.6.4"]
    for version in set(_page_versions("flashinfer-jit-cache-sm120f")):
        assert str(version) in choice.reason  # what the variant offers instead


def test_several_architectures_keep_the_generic_project(tmp_path):
    spec, (choice,) = _choose(tmp_path, ["flashinfer-jit-cache>=0.7"],
                              ["sm_90", "sm_120"])
    assert choice.chosen == "flashinfer-jit-cache"
    assert "sm_90, sm_120" in choice.reason
    assert spec.packages[0].name == "flashinfer-jit-cache"


def test_an_undeclared_architecture_keeps_the_generic_project(tmp_path):
    _, (choice,) = _choose(tmp_path, ["flashinfer-jit-cache>=0.7"], ["sm_89"])
    assert (choice.chosen, choice.reason) == (
        "flashinfer-jit-cache", "no variant of flashinfer-jit-cache is declared "
        "for sm_89")


def test_prereleases_of_the_generic_project_carry_over(tmp_path):
    spec, (choice,) = _choose(tmp_path, ["flashinfer-jit-cache>=0.7.1.dev0"],
                              ["sm_120"], frozenset({"flashinfer-jit-cache"}))
    assert choice.chosen == "flashinfer-jit-cache-sm120f"
    assert "0.7.1rc1" in choice.reason
    assert spec.prereleases == frozenset({"flashinfer-jit-cache-sm120f"})


def test_variants_are_pinned_to_the_generic_projects_index():
    profile = parse_profile({
        "index": [{"name": "pypi"}, INDEX.to_dict()],
        "requirements": {"packages": ["flashinfer-jit-cache"]},
        "gpu-variants": {
            "flashinfer-jit-cache": {"sm_120": "Flashinfer_JIT_Cache-SM120F"}},
    }, name="t")
    assert pin_variants(profile).index_named("flashinfer-cu130").packages == (
        "flashinfer-jit-cache", "flashinfer-jit-cache-sm120f")
    assert pin_variants(profile).index_named("pypi").packages == ()


def test_requirements_without_the_generic_project_are_left_alone():
    spec = RequirementsSpec(packages=(Requirement("torch==2.11.0"),))
    out, choices = choose_variants(spec, DECLARED, ("sm_120",), finder=None)
    assert (out, choices) == (spec, ())


@pytest.mark.parametrize(("table", "key"), [
    ([], "gpu-variants"),
    ({"flashinfer-jit-cache": {}}, "gpu-variants.flashinfer-jit-cache"),
    ({"flashinfer-jit-cache": {"120": "x"}}, "gpu-variants.flashinfer-jit-cache.120"),
    ({"flashinfer-jit-cache": {"sm_120": 3}},
     "gpu-variants.flashinfer-jit-cache.sm_120"),
    ({"flashinfer-jit-cache": {"sm_120": "not a name!"}},
     "gpu-variants.flashinfer-jit-cache.sm_120"),
    ({"flashinfer-jit-cache": {"sm_120": "flashinfer_jit_cache"}},
     "gpu-variants.flashinfer-jit-cache.sm_120"),
])
def test_bad_tables_name_the_key(table, key):
    data = {"requirements": {"packages": ["x"]}, "gpu-variants": table}
    with pytest.raises(ProfileError) as info:
        parse_profile(data, name="t", path="p.toml")
    assert info.value.key == key and "p.toml" in str(info.value)
