"""Stack coherence on real wheels: filenames from the recorded sgl-kernel and PyTorch
pages, Requires-Dist from real PyPI METADATA and the H200 probe."""

from __future__ import annotations

import ast
from email.parser import BytesParser
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from stacklock.cuda.coherence import (
    CudaMixError,
    PackageInfo,
    check_coherence,
    render_coherence,
    wheel_cuda,
)
from stacklock.index.pages import Link, parse_html_page

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "real"
SGL = REAL / "sgl-project-whl-gh-pages"
SGL_CU130 = "https://docs.sglang.io/whl/cu130"
SGL_CU128 = "https://docs.sglang.io/whl/cu128"
TORCH_CU128_PAGE = (REAL / "pytorch-index-anchor-excerpts"
                    / "cu128-torch-2.11.0_pytorch-issue-181056.html")


def _links(path: Path, base: str) -> dict[str, Link]:
    return {link.filename: link
            for link in parse_html_page(path.read_bytes(), base).links}


def _package(link: Link, index_url: str, requires: tuple[str, ...] = ()
             ) -> PackageInfo:
    name, version, _build, _tags = parse_wheel_filename(link.filename)
    return PackageInfo(name=str(name), version=str(version), filename=link.filename,
                       index_url=index_url, requires_dist=requires)


def _requires(metadata: Path) -> tuple[str, ...]:
    msg = BytesParser().parsebytes(metadata.read_bytes())
    return tuple(msg.get_all("Requires-Dist") or ())


@pytest.fixture(scope="module")
def sgl_cu130() -> PackageInfo:
    links = _links(SGL / "cu130" / "sgl-kernel" / "index.html",
                   f"{SGL_CU130}/sgl-kernel/")
    name = "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"
    return _package(links[name], SGL_CU130)


@pytest.fixture(scope="module")
def torch_cu128() -> PackageInfo:
    links = _links(TORCH_CU128_PAGE, "https://download.pytorch.org/whl/cu128/torch/")
    name = "torch-2.11.0+cu128-cp310-cp310-manylinux_2_28_x86_64.whl"
    return _package(links[name], "https://download.pytorch.org/whl/cu128")


@pytest.fixture(scope="module")
def torch_pypi_cu128() -> PackageInfo:
    meta = DATA / "cuda" / "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl.METADATA"
    return PackageInfo(name="torch", version="2.9.1",
                       filename="torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl",
                       index_url="https://pypi.org/simple",
                       requires_dist=_requires(meta))


def test_cu128_torch_with_cu130_sgl_kernel_is_rejected_naming_both(
        torch_cu128: PackageInfo, sgl_cu130: PackageInfo):
    with pytest.raises(CudaMixError) as info:
        check_coherence([torch_cu128, sgl_cu130], "13.0.1")
    message = info.value.message
    assert "torch-2.11.0+cu128-cp310-cp310-manylinux_2_28_x86_64.whl" in message
    assert "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl" in message
    assert set(info.value.wheels) == {12, 13}
    assert info.value.hint is not None and "one CUDA major" in info.value.hint


def test_pypi_torch_known_by_requires_dist_is_cuda_12_8(
        torch_pypi_cu128: PackageInfo, sgl_cu130: PackageInfo):
    target = wheel_cuda(torch_pypi_cu128)
    assert target is not None and target.cuda == "12.8"
    assert "nvidia-cuda" in target.evidence
    with pytest.raises(CudaMixError) as info:
        check_coherence([torch_pypi_cu128, sgl_cu130], "13.0.1")
    assert "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl" in info.value.message
    assert "sgl_kernel-0.3.21+cu130" in info.value.message
    # no [cuda] toolkit declared: no CUDA was promised, the mix is a warning
    findings = check_coherence([torch_pypi_cu128, sgl_cu130], None)
    assert {(f.package, f.cuda, f.level) for f in findings} == {
        ("torch", "12.8", "warning"), ("sgl-kernel", "13.0", "warning")}
    assert all("mixes CUDA 12 and 13 wheels, not refused because the profile "
               "declares no [cuda] toolkit" in f.message for f in findings)


def test_torch_of_the_h200_targets_13_0_by_its_cuda_toolkit_requirement():
    line = next(ln for ln in (REAL / "device" / "h200-environment-probe.txt")
                .read_text().splitlines() if ln.startswith("['filelock'"))
    requires = tuple(ast.literal_eval(line))
    pkg = PackageInfo(name="torch", version="2.11.0", requires_dist=requires)
    target = wheel_cuda(pkg)
    assert target is not None and target.cuda == "13.0"
    assert target.evidence.startswith("Requires-Dist cuda-toolkit[")


def test_coherent_cu130_stack_gives_one_finding_per_gpu_wheel(sgl_cu130: PackageInfo):
    torch = PackageInfo(name="torch", version="2.11.0+cu130",
                        filename="torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
                        index_url="https://download.pytorch.org/whl/cu130")
    filelock = PackageInfo(name="filelock", version="3.20.0",
                           filename="filelock-3.20.0-py3-none-any.whl",
                           index_url="https://download.pytorch.org/whl/cu130")
    findings = check_coherence([torch, sgl_cu130, filelock], "13.0.1")
    assert [(f.package, f.cuda, f.level) for f in findings] == [
        ("torch", "13.0", "ok"), ("sgl-kernel", "13.0", "ok")]
    assert "+cu130 label" in render_coherence(findings)


def test_toolkit_of_another_major_names_the_wheel_and_the_toolkit(
        sgl_cu130: PackageInfo):
    with pytest.raises(CudaMixError) as info:
        check_coherence([sgl_cu130], "12.8.1")
    assert "toolkit 12.8.1" in info.value.message
    assert sgl_cu130.filename is not None
    assert sgl_cu130.filename in info.value.message


def test_wheel_newer_minor_than_toolkit_is_a_warning():
    meta = DATA / "metadata" / "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    torch = PackageInfo(name="torch", version="2.15.0",
                        filename="torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                        requires_dist=_requires(meta / "METADATA"))
    (finding,) = check_coherence([torch], "13.0.1")
    assert (finding.cuda, finding.level) == ("13.2", "warning")
    assert "newer than toolkit 13.0.1" in finding.message


def test_label_beats_the_index_it_came_from():
    # the real cu128 sgl page also serves +cu124 and +cu129 wheels
    links = _links(SGL / "cu128" / "sgl-kernel" / "index.html",
                   f"{SGL_CU128}/sgl-kernel/")
    cu124 = links["sgl_kernel-0.3.9.post1+cu124-cp310-abi3-manylinux2014_x86_64.whl"]
    target = wheel_cuda(_package(cu124, SGL_CU128))
    assert target is not None and target.cuda == "12.4"


def test_index_is_evidence_only_for_platform_wheels():
    unlabelled = PackageInfo(
        name="sgl-kernel", version="0.3.21",
        filename="sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl",
        index_url=SGL_CU130)
    target = wheel_cuda(unlabelled)
    assert target is not None and (target.cuda, target.evidence) == (
        "13.0", "index .../cu130")
    pure = PackageInfo(name="filelock", version="3.20.0",
                       filename="filelock-3.20.0-py3-none-any.whl",
                       index_url="https://download.pytorch.org/whl/cu130")
    assert wheel_cuda(pure) is None
    cpu = PackageInfo(name="torch", version="2.11.0+cpu",
                      filename="torch-2.11.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert wheel_cuda(cpu) is None


def test_optional_dependencies_do_not_count():
    pkg = PackageInfo(name="x", version="1.0",
                      requires_dist=('nvidia-nccl-cu12; extra == "gpu"',
                                     "nvidia-nccl-cu13==2.28.9"))
    target = wheel_cuda(pkg)
    assert target is not None and target.cuda == "13"


def test_wheel_requiring_two_majors_is_an_error():
    pkg = PackageInfo(name="x", version="1.0",
                      requires_dist=("nvidia-cuda-runtime-cu12==12.8.90",
                                     "nvidia-nccl-cu13==2.28.9"))
    with pytest.raises(CudaMixError, match="two majors"):
        wheel_cuda(pkg)


# -- [cuda] allow-mixed: a reviewed CUDA 12 carrier in a CUDA 13 stack ------------
# Real resolutions replayed from tests/data/resolve/cassettes/: torch 2.11 (CUDA
# 13.0) with nvidia-cutlass-dsl[cu13] 4.8.1, which brings nvidia-cutlass-dsl-libs-cu13
# and, always, nvidia-cutlass-dsl-libs-cu12 (cases/cuda-allow.toml); cuda-mix.toml
# asks for nvidia-cutlass-dsl without the extra, so no CUDA 13 twin comes along.

CASES = DATA / "resolve" / "cases"
CASSETTES = DATA / "resolve" / "cassettes"
CARRIER = "nvidia-cutlass-dsl-libs-cu12"


def _layered(*names: str):
    from tests.helpers.cassette import Layered, ReplayTransport

    return Layered(*(ReplayTransport(CASSETTES / n) for n in names))


def _resolve_case(name: str, cache: Path, **changes):
    from dataclasses import replace

    from stacklock.http import make_http_client
    from stacklock.profile import load_profile
    from stacklock.resolve.resolution import resolve_profile

    profile = load_profile(str(CASES / f"{name}.toml"))
    if changes:
        profile = replace(profile, cuda=replace(profile.cuda, **changes))
    with make_http_client(transport=_layered("torch-cu130", name)) as http:
        return resolve_profile(profile, http=http, cache_dir=cache)


@pytest.fixture(scope="module")
def allowed_stack(tmp_path_factory):
    """cuda-allow resolved and locked through the CLI's library call."""
    from stacklock.http import make_http_client
    from stacklock.lock import load_lock
    from stacklock.resolve.locking import lock_profile

    root = tmp_path_factory.mktemp("cuda-allow")
    out = root / "pylock.cuda-allow.toml"
    with make_http_client(transport=_layered("torch-cu130", "cuda-allow")) as http:
        # check=False: the cassettes hold pages and METADATA, not wheel bytes;
        # the native check has its own tests (test_native_*.py)
        result = lock_profile(str(CASES / "cuda-allow.toml"), output=out, http=http,
                              cache_dir=root / "cache", check=False)
    return result, load_lock(out)


def _infos(resolution) -> list[PackageInfo]:
    return [PackageInfo(name=p.name, version=str(p.version),
                        filename=p.wheel.filename, index_url=p.index_url,
                        requires_dist=p.requires_dist,
                        dependencies=tuple(p.dependencies))
            for p in resolution.packages]


def test_allowed_carrier_is_reported_and_recorded_not_mixed(allowed_stack):
    result, lock = allowed_stack
    res = result.resolution
    names = set(res.pins())
    assert {CARRIER, "nvidia-cutlass-dsl-libs-cu13", "torch"} <= names
    allowed = [f for f in res.coherence if f.level == "allowed"]
    assert [(f.package, f.cuda) for f in allowed] == [("nvidia-cutlass-dsl", "12")]
    assert CARRIER in allowed[0].message and "allow-mixed" in allowed[0].message
    # nvidia-cutlass-dsl is labelled by nothing else: no CUDA 12 label in the lock
    labels = {p.name: p.cuda for p in lock.packages if p.cuda is not None}
    assert labels["torch"] == "13.0"
    assert all(c.startswith("13") for c in labels.values())
    assert "nvidia-cutlass-dsl" not in labels
    assert lock.cuda is not None and lock.cuda.allow_mixed == (CARRIER,)
    assert lock.stack is not None
    assert lock.stack.allow_mixed == ()  # the cuda entry holds it
    from stacklock.resolve.locking import render_resolve

    assert f"cuda allowed: nvidia-cutlass-dsl: requires {CARRIER}" in render_resolve(
        result)


def test_a_carrier_beside_its_twin_is_recognised_without_an_allowance(tmp_path):
    """nvidia-cutlass-dsl requires its CUDA 12 libraries always and, through
    [cu13], their CUDA 13 twin, which the lock holds: it carries both, so the
    CUDA 12 requirement is reported as carried, never counted as a mix."""
    res = _resolve_case("cuda-allow", tmp_path / "cache", allow_mixed=())
    carried = [f for f in res.coherence if f.level == "carried"]
    assert [(f.package, f.cuda) for f in carried] == [("nvidia-cutlass-dsl", "12")]
    assert carried[0].message == (
        f"requires {CARRIER}==4.8.1 (CUDA 12), carried along beside its twin "
        "nvidia-cutlass-dsl-libs-cu13, which the lock holds too: not counted as a "
        "CUDA target")
    labels = {p.name: p.cuda for p in res.packages}
    assert labels["torch"] == "13.0" and labels["nvidia-cutlass-dsl"] is None
    assert {f.level for f in res.coherence} == {"ok", "carried"}


def test_carried_twins_on_real_metadata(allowed_stack):
    from stacklock.cuda.coherence import carried_twins

    infos = {p.name: p for p in _infos(allowed_stack[0].resolution)}
    dsl = infos["nvidia-cutlass-dsl"]
    present = set(infos)
    assert carried_twins(dsl, present) == {CARRIER: "nvidia-cutlass-dsl-libs-cu13"}
    # without the twin in the lock the CUDA 12 requirement is evidence again
    assert carried_twins(dsl, present - {"nvidia-cutlass-dsl-libs-cu13"}) == {}
    target = wheel_cuda(dsl, present=present - {"nvidia-cutlass-dsl-libs-cu13"})
    assert target is not None and target.cuda == "12"


def test_a_carrier_without_its_twin_is_named_in_the_hint(tmp_path):
    from stacklock.http import make_http_client
    from stacklock.profile import load_profile
    from stacklock.resolve.resolution import resolve_profile

    profile = load_profile(str(CASES / "cuda-mix.toml"))
    with make_http_client(transport=_layered("torch-cu130", "cuda-mix")) as http, \
            pytest.raises(CudaMixError) as info:
        resolve_profile(profile, http=http, cache_dir=tmp_path / "cache")
    hint = info.value.hint or ""
    assert f"{CARRIER} is required by nvidia-cutlass-dsl and" in hint
    assert "twin" not in hint
    assert f'[cuda] allow-mixed = ["{CARRIER}"]' in hint


def test_lock_without_a_cuda_entry_records_the_allowance_at_the_top(allowed_stack):
    from dataclasses import replace

    from stacklock.resolve.lockfile import make_lock

    res = allowed_stack[0].resolution
    stack = make_lock(replace(res, cuda_entry=None)).stack
    assert stack is not None
    assert stack.cuda is None and stack.allow_mixed == (CARRIER,)


def test_allowance_names_are_normalized_and_unused_ones_are_a_warning(
        allowed_stack):
    packages = _infos(allowed_stack[0].resolution)
    findings = check_coherence(packages, "13.0.1", allow_mixed=[
        "NVIDIA_Cutlass_DSL_libs_cu12", "nvidia-nccl-cu12"])
    levels = {(f.package, f.level) for f in findings}
    assert ("nvidia-cutlass-dsl", "allowed") in levels
    (stale,) = [f for f in findings if f.package == "nvidia-nccl-cu12"]
    assert stale.level == "warning" and "remove it" in stale.message
    assert "warning" in render_coherence(findings)


def test_allowance_sets_aside_only_what_it_names(
        torch_cu128: PackageInfo, sgl_cu130: PackageInfo, allowed_stack):
    # a real CUDA 12.8 torch next to a CUDA 13 kernel stays a mix
    with pytest.raises(CudaMixError) as info:
        check_coherence([torch_cu128, sgl_cu130], "13.0.1", allow_mixed=[CARRIER])
    assert "allow-mixed" in (info.value.hint or "")
    # ... unless the reviewer names that very package: then it is reported, not mixed
    findings = check_coherence([torch_cu128, sgl_cu130], "13.0.1",
                               allow_mixed=["torch"])
    assert {(f.package, f.cuda, f.level) for f in findings} == {
        ("torch", "12.8", "allowed"), ("sgl-kernel", "13.0", "ok")}
    # and the allowed carrier does not hide a second, unnamed CUDA 12 requirement
    packages = _infos(allowed_stack[0].resolution)
    extra = PackageInfo(name="x", version="1.0",
                        requires_dist=("nvidia-cuda-runtime-cu12==12.8.90",))
    with pytest.raises(CudaMixError, match=r"x==1\.0"):
        check_coherence([*packages, extra], "13.0.1", allow_mixed=[CARRIER])
