"""The [tool.stacklock.cuda] lock entry and the cuda-toolkit requirement, from the
built-in profiles and the real PyPI metadata of cuda-toolkit."""

from __future__ import annotations

import json
import tomllib
from email.parser import BytesParser
from pathlib import Path

import pytest
import tomlkit

from stacklock.cuda.lock_entry import (
    PYPI_COMPONENTS,
    make_lock_entry,
    pypi_requirements,
)
from stacklock.errors import CudaError
from stacklock.profile import CudaSpec, load_profile
from stacklock.target import Target

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "real"
X86 = Target(platform="linux_x86_64")
ARM = Target(platform="linux_aarch64")


def _spack_sha256(version: str, platform: str) -> str:
    for line in (REAL / "spack-cuda-runfile-sha256.tsv").read_text().splitlines():
        cells = line.split("\t")
        if cells[:2] == [version, platform]:
            return cells[2]
    raise AssertionError(f"{version} {platform} not in spack")


def test_blackwell_cu130_lock_entry():
    profile = load_profile("blackwell-cu130")
    entry = make_lock_entry(profile.cuda, profile.target)
    assert entry is not None
    assert list(entry) == [
        "version", "source", "platform", "runfile", "url", "size", "md5", "sha256",
        "bundled-driver", "min-driver", "compat-floor", "prefix", "install-args"]
    assert entry["runfile"] == "cuda_13.0.1_580.82.07_linux.run"
    assert entry["url"] == ("https://developer.download.nvidia.com/compute/cuda/"
                            "13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run")
    assert entry["sha256"] == _spack_sha256("13.0.1", "Linux-x86_64")
    assert entry["md5"] == "8c56e3cb1ab74370aafed5a4600bc5bc"
    assert entry["prefix"] == "/usr/local/cuda-13.0"
    assert entry["install-args"] == [
        "--silent", "--toolkit", "--override", "--toolkitpath=/usr/local/cuda-13.0",
        "--no-opengl-libs", "--no-man-page", "--no-drm"]
    assert not any(a.startswith("--driver") for a in entry["install-args"])
    # it goes into a TOML lock as it is
    doc = tomlkit.document()
    doc["cuda"] = entry
    assert tomllib.loads(tomlkit.dumps(doc))["cuda"] == entry


def test_blackwell_cu128_lock_entry():
    profile = load_profile("blackwell-cu128")
    entry = make_lock_entry(profile.cuda, profile.target)
    assert entry is not None
    assert entry["runfile"] == "cuda_12.8.1_570.124.06_linux.run"
    assert entry["sha256"] == _spack_sha256("12.8.1", "Linux-x86_64")
    assert entry["min-driver"] == "570.124.06"
    assert entry["compat-floor"] == "525.0"
    assert entry["prefix"] == "/usr/local/cuda-12.8"


def test_sbsa_entry_and_custom_prefix():
    cuda = CudaSpec(toolkit="13.0.1", source="runfile", prefix="/opt/cuda-13.0.1")
    entry = make_lock_entry(cuda, ARM)
    assert entry is not None
    assert entry["platform"] == "linux-sbsa"
    assert entry["runfile"] == "cuda_13.0.1_580.82.07_linux_sbsa.run"
    assert entry["sha256"] == _spack_sha256("13.0.1", "Linux-aarch64")
    assert "--toolkitpath=/opt/cuda-13.0.1" in entry["install-args"]


def test_unknown_values_are_left_out_not_guessed():
    entry = make_lock_entry(CudaSpec(toolkit="12.9.2", source="runfile"), X86)
    assert entry is not None
    assert "sha256" not in entry and "min-driver" not in entry
    assert entry["md5"] == "9b91ed7b1fb15f2ba42b94135dbc95b8"


def test_none_source_gives_no_entry():
    assert make_lock_entry(CudaSpec(), X86) is None
    assert pypi_requirements(CudaSpec(toolkit="13.0.1", source="runfile")) == []


def test_unknown_toolkit_lists_the_known_ones():
    with pytest.raises(CudaError) as info:
        make_lock_entry(CudaSpec(toolkit="13.0.7", source="runfile"), X86)
    assert info.value.hint is not None and "13.0.1" in info.value.hint


def test_pypi_source_requirement_uses_real_extras():
    cuda = CudaSpec(toolkit="13.0.1", source="pypi", components=("nvcc", "cudart"))
    assert pypi_requirements(cuda) == ["cuda-toolkit[cudart,nvcc]==13.0.1"]
    meta = BytesParser().parsebytes(
        (DATA / "cuda" / "cuda_toolkit-13.0.1-py2.py3-none-any.whl.metadata")
        .read_bytes())
    assert {"cudart", "nvcc"} <= set(meta.get_all("Provides-Extra") or ())
    entry = make_lock_entry(cuda, X86)
    assert entry is not None and entry["source"] == "pypi"
    assert entry["requirements"] == ["cuda-toolkit[cudart,nvcc]==13.0.1"]
    assert "url" not in entry and "install-args" not in entry


def test_component_list_is_cuda_toolkit_extras_on_pypi():
    project = json.loads((DATA / "cuda" / "pypi-cuda-toolkit.json").read_text())
    assert set(project["info"]["provides_extra"]) == PYPI_COMPONENTS
    meta = BytesParser().parsebytes(
        (DATA / "cuda" / "cuda_toolkit-13.0.1-py2.py3-none-any.whl.metadata")
        .read_bytes())
    assert set(meta.get_all("Provides-Extra") or ()) <= PYPI_COMPONENTS


def test_unknown_component_is_an_error():
    with pytest.raises(CudaError, match="'nvccc'"):
        pypi_requirements(CudaSpec(toolkit="13.0.1", source="pypi",
                                   components=("nvccc",)))


def test_pypi_without_components():
    assert pypi_requirements(CudaSpec(toolkit="12.8.1", source="pypi")) == [
        "cuda-toolkit==12.8.1"]


@pytest.mark.live
def test_pypi_has_the_cuda_toolkit_versions_the_profiles_lock():
    import httpx

    response = httpx.get("https://pypi.org/simple/cuda-toolkit/", timeout=30,
                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    response.raise_for_status()
    from packaging.requirements import Requirement
    from packaging.utils import parse_wheel_filename

    from stacklock.profile import list_profiles

    on_pypi = {parse_wheel_filename(f["filename"])[1]
               for f in response.json()["files"] if f["filename"].endswith(".whl")}
    # every built-in profile's toolkit, whatever its source (pypi-cu130's 13.0.3 is
    # cuda_toolkit-13.0.3.0 on PyPI: the requirement must still match it)
    toolkits = {load_profile(n).cuda.toolkit for n in list_profiles()} - {None}
    assert {"13.0.1", "12.8.1", "13.0.3"} <= toolkits
    for version in sorted(t for t in toolkits if t is not None):
        requirement = pypi_requirements(CudaSpec(toolkit=version, source="pypi"))[0]
        assert requirement == f"cuda-toolkit=={version}"
        assert any(v in Requirement(requirement).specifier for v in on_pypi), version
