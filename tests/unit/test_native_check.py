"""The native check's verdicts on facts recorded from real wheels (what each real
shared object needs and exports); tests/live/test_native_live.py confirms the same
verdicts with real imports in a real venv."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from stacklock.errors import NativeCheckError
from stacklock.native import judge_natives, raise_for_findings
from stacklock.native.baseline import baseline_sonames
from stacklock.native.check import (
    find_alternatives,
    large_members_needed,
    symbol_family,
    top_namespace,
)
from stacklock.native.families import owned_families
from tests.helpers.native_facts import load_facts, pick

TORCH = ("torch==2.11.0", "nvidia-cuda-runtime==13.0.96")
TARGET = {"manylinux": "2_28", "platform": "linux_x86_64", "python": "3.12"}


def _judge(*keys: str, allow: tuple[str, ...] = ()):
    wheels, natives = pick(*keys)
    return judge_natives(wheels, natives, allow=allow, **TARGET)


def test_torchaudio_for_cuda_12_on_torch_2_11_needs_libcudart_12():
    report = _judge(*TORCH, "torchaudio==2.9.1")
    sonames = {(f.object, f.missing) for f in report.findings if f.kind == "soname"}
    assert ("torchaudio/lib/libtorchaudio.so", "libcudart.so.12") in sonames
    cudart = next(f for f in report.findings if f.missing == "libcudart.so.12")
    assert cudart.package == "torchaudio" and cudart.version == "2.9.1"
    assert cudart.counterpart == "nvidia-cuda-runtime 13.0.96"
    assert cudart.counterpart_has == ("libcudart.so.13",)
    assert "lock a torchaudio built for it" in cudart.describe()


def test_torchaudio_2_11_on_torch_2_11_passes():
    report = _judge(*TORCH, "torchaudio==2.11.0")
    assert report.ok and report.findings == () and report.allowed == ()
    assert report.wheels == 3 and report.objects == 1 + 13 + 3


def test_torchvision_built_for_torch_2_12_misses_symbols_of_torch_2_11():
    report = _judge(*TORCH, "torchvision==0.27.0")
    assert {f.kind for f in report.findings} == {"symbol"}
    missing = {f.missing for f in report.findings}
    assert "_ZNR5torch7Library4_defEON3c1014FunctionSchemaEPNS1_12OperatorNameERKSt6" \
        "vectorINS_10headeronly3TagESaIS8_EENS_17_RegisterOrVerifyE" in missing
    assert {f.object for f in report.findings} == {"torchvision/_C.so"}
    assert {f.counterpart for f in report.findings} == {"torch 2.11.0"}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs binutils c++filt")
def test_symbols_are_named_demangled_and_mangled():
    report = _judge(*TORCH, "torchvision==0.27.0")
    named = {f.demangled for f in report.findings}
    assert any(d and d.startswith("torch::Library::_def(") for d in named)
    line = report.findings[0].describe()
    assert report.findings[0].missing in line and "torch 2.11.0" in line


def test_torchvision_on_the_stable_c_abi_misses_a_c_symbol_of_torch_2_11():
    """torchvision 0.29.0 (for torch 2.14) links torch's stable C ABI; torch 2.11.0
    lacks one of its functions. A C symbol, judged by its prefix family."""
    report = _judge(*TORCH, "torchvision==0.29.0")
    missing = {(f.object, f.missing) for f in report.findings}
    assert ("torchvision/_C_stable.so",
            "torch_exception_get_what_without_backtrace") in missing
    assert {f.counterpart for f in report.findings} == {"torch 2.11.0"}


def test_a_soname_no_locked_wheel_ships_in_any_version_is_left_to_the_system():
    """Without nvidia-cuda-runtime nothing in the lock ships a libcudart at all:
    the system may (a toolkit on the library path), so it is a note."""
    report = _judge("torch==2.11.0", "torchaudio==2.9.1")
    cudart12 = [f for f in report.notes if f.missing == "libcudart.so.12"]
    assert cudart12 and not any(f.missing == "libcudart.so.12"
                                for f in report.findings)
    system = set(baseline_sonames(**TARGET))  # what manylinux promises is no note
    assert "libc.so.6" in system and not {f.missing for f in report.notes} & system


def test_allow_moves_a_packages_findings_aside_and_records_it():
    report = _judge(*TORCH, "torchaudio==2.9.1", allow=("TorchAudio",))
    assert report.ok and report.allow == ("torchaudio",)
    assert {f.package for f in report.allowed} == {"torchaudio"}
    raise_for_findings(report)  # nothing blocks


def test_blocking_findings_raise_exit_1_with_the_allow_line():
    report = _judge(*TORCH, "torchaudio==2.9.1")
    with pytest.raises(NativeCheckError) as caught:
        raise_for_findings(report)
    assert caught.value.exit_code == 1
    text = str(caught.value)
    assert "libcudart.so.12" in text and '[check] allow = ["torchaudio"]' in text
    assert caught.value.findings == report.findings


def test_baseline_follows_the_manylinux_policy():
    old = baseline_sonames(manylinux="2_17", platform="linux_x86_64", python="3.12")
    new = baseline_sonames(manylinux="2_28", platform="linux_x86_64", python="3.12")
    assert "libmvec.so.1" in new - old  # added in manylinux_2_24
    assert {"libc.so.6", "libstdc++.so.6", "ld-linux-x86-64.so.2"} <= old
    assert "libpython3.12.so.1.0" in old and "libcuda.so.1" in old
    arm = baseline_sonames(manylinux="2_28", platform="linux_aarch64", python="3.11")
    assert "ld-linux-aarch64.so.1" in arm and "libpython3.11.so.1.0" in arm


def test_symbol_families():
    assert symbol_family("_ZN3c104cuda9SetDeviceEi") == "c++:c10"
    assert symbol_family("aoti_torch_get_device_type") == "c:aoti"
    assert symbol_family("_ZN9__gnu_cxx13new_allocatorIcED2Ev") is None
    for plain in ("memcpy", "cudaGetDevice", "_PyObject_GC_New"):
        assert symbol_family(plain) is None, plain
    assert symbol_family("PyInit__C") == "c:PyInit"


def test_top_namespace_of_real_symbols():
    facts = load_facts()
    torch = facts["torch==2.11.0"][1]
    spaces = {top_namespace(s) for o in torch.objects for s in o.exported}
    assert {"c10", "at", "torch"} <= spaces
    assert top_namespace("_ZN3c104cuda9SetDeviceEi") == "c10"
    assert top_namespace("_ZNK2at10TensorBase4nameEv") == "at"
    assert top_namespace("_ZTVN5torch8autograd4NodeE") == "torch"
    assert top_namespace("_ZNSt6vectorIiSaIiEED1Ev") is None  # std::, substituted
    assert top_namespace("_Z3fooi") is None and top_namespace("PyInit__C") is None



def test_owned_families_of_real_wheels_are_their_symbols_families():
    # owned_families reads every export in one pass of two patterns: the same
    # families symbol_family gives one symbol at a time, on every recorded
    # wheel's exports (and on names that are not C++ or C-prefixed)
    odd = ["_ZN1_x", "_ZN0a", "_Z", "ab_", "1a_b", "ab-c_d", "ab_c\u00e9", "x1_y"]
    for _key, (_wheel, natives) in sorted(load_facts().items()):
        for exports in (natives.exports, [*natives.exports, *odd * 10]):
            counts: dict[str, int] = {}
            for symbol in exports:
                family = symbol_family(symbol)
                if family is not None:
                    counts[family] = counts.get(family, 0) + 1
            assert owned_families(exports) == {
                f for f, n in counts.items() if f.startswith("c++:") or n >= 10}


def test_a_name_length_of_thousands_of_digits_is_no_traceback():
    # a crafted export: int() refuses strings of over 4,300 digits (ValueError)
    huge = "_ZN" + "9" * 5000 + "x4cuda3fooEv"
    family = symbol_family(huge)
    assert family == f"c++:{top_namespace(huge)}"  # a nonsense name, no error
    assert owned_families([huge, "_ZN3c104cuda9SetDeviceEi"]) == {"c++:c10", family}

# -- the cases of issue 30 and issue 28 item 6, each on a real wheel's facts ------


def test_xformers_0_0_35_beside_torch_for_cuda_13_needs_libcudart_12():
    report = _judge(*TORCH, "xformers==0.0.35")
    cudart = [f for f in report.findings if f.missing == "libcudart.so.12"]
    assert {f.object for f in cudart} == {"xformers/_C.so"}
    assert cudart[0].counterpart == "nvidia-cuda-runtime 13.0.96"
    assert report.unloaded == ()


def test_torchaudio_2_11_1_misses_a_stable_abi_function_of_torch_2_11_0():
    report = _judge(*TORCH, "torchaudio==2.11.1")
    missing = {f.missing for f in report.findings}
    assert "torch_exception_get_what" in missing
    assert {f.package for f in report.findings} == {"torchaudio"}
    assert "does not export" in report.findings[0].reason()


def test_a_py3_none_any_wheel_with_cuda_12_libraries_only_is_refused():
    """bitsandbytes 0.39.0 is tagged py3-none-any and ships one library per CUDA
    11/12 release: none of them finds a libcudart the lock ships."""
    wheels, _ = pick("bitsandbytes==0.39.0")
    assert wheels[0].filename.endswith("-py3-none-any.whl")
    report = _judge(*TORCH, "bitsandbytes==0.39.0")
    needing = {f.object for f in report.findings if f.missing.startswith("libcudart")}
    assert "bitsandbytes/libbitsandbytes_cuda121.so" in needing
    assert report.unloaded == ()


def test_bitsandbytes_with_a_cuda_13_build_passes_its_other_builds_unloaded():
    report = _judge(*TORCH, "bitsandbytes==0.50.2")
    assert report.ok
    unloaded = {f.object for f in report.unloaded}
    assert unloaded and all("cuda13" not in o for o in unloaded)
    assert all(f.unloaded and "loads" in f.unloaded for f in report.unloaded)


def test_torch_memory_saver_loads_its_cuda_13_hooks():
    """Its _cu12 hooks and the unsuffixed ones (the ROCm build) link
    libcudart.so.12; under torch for CUDA 13 it loads the _cu13 ones (the live
    test imports it and asks which)."""
    report = _judge(*TORCH, "torch-memory-saver==0.0.10")
    assert report.ok
    assert {f.object for f in report.unloaded} == {
        "torch_memory_saver_hook_mode_preload.abi3.so",
        "torch_memory_saver_hook_mode_preload_cu12.abi3.so",
        "torch_memory_saver_hook_mode_torch.abi3.so",
        "torch_memory_saver_hook_mode_torch_cu12.abi3.so"}


def test_torch_c_dlpack_ext_has_no_add_on_for_torch_2_11_and_loads_none():
    report = _judge(*TORCH, "torch-c-dlpack-ext==0.1.5")
    assert report.ok and report.unloaded
    assert {f.unloaded for f in report.unloaded} == {
        "the wheel has no build for torch 2.11.0 and loads none"}


def test_alternatives_are_builds_for_runtimes_not_modules_imported_together():
    _, natives = pick("torch-memory-saver==0.0.10")
    families = find_alternatives(natives[0].objects)
    assert [(f.pattern, f.selector, sorted(f.variants)) for f in families] == [
        ("torch_memory_saver_hook_mode_preload_cu#", "cu", ["", "12", "13"]),
        ("torch_memory_saver_hook_mode_torch_cu#", "cu", ["", "12", "13"])]
    _, natives = pick("torch-c-dlpack-ext==0.1.5")
    assert find_alternatives(natives[0].objects) == []  # named for torch: needs it
    assert len(find_alternatives(natives[0].objects, {"torch"})) == 2
    _, natives = pick("nvidia-cusolver==12.0.4.66")  # libcusolver, libcusolverMg
    assert find_alternatives(natives[0].objects, {"torch"}) == []


def test_the_build_named_for_the_locked_torch_minor_is_the_one_loaded():
    """torch-c-dlpack-ext ships one add-on per torch minor (2.4 to 2.9): with
    torch 2.9.1 locked, the "29" build loads; with 2.10 or 2.11, none."""
    from stacklock.native.check import _selected

    _, natives = pick("torch-c-dlpack-ext==0.1.5")
    families = find_alternatives(natives[0].objects, {"torch"})
    assert len(families) == 2
    for locked, loaded in (("2.9.1", "29"), ("2.9.0.post1", "29"), ("2.10.0", ""),
                           ("2.11.0", "")):
        assert {_selected(f, {"torch": locked}) for f in families} == {loaded}
    assert {_selected(f, {}) for f in families} == {None}  # torch not locked


# -- large members unread (wheel.LARGE_MEMBER): the same real facts, torch's big
#    libraries listed as not read, as a cold check first sees them -------------


def _unread(natives, *paths):
    return replace(natives, objects=tuple(o for o in natives.objects
                                          if o.path not in paths),
                   large=tuple(sorted(paths)))


BIG = ("torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so")


def test_an_extension_of_torch_asks_for_libtorch_cpu_never_libtorch_cuda():
    wheels, natives = pick(*TORCH, "torchaudio==2.11.1")
    natives[0] = _unread(natives[0], *BIG)
    assert large_members_needed(wheels, natives) == {0: {"torch/lib/libtorch_cpu.so"}}


def test_nothing_asks_for_cuda_libraries_an_extension_does_not_link():
    wheels, natives = pick(*TORCH, "torchaudio==2.11.0")
    nvidia = natives[1]
    natives[1] = _unread(nvidia, *(o.path for o in nvidia.objects))
    natives[0] = _unread(natives[0], "torch/lib/libtorch_cuda.so")
    assert large_members_needed(wheels, natives) == {}


def test_with_libtorch_cuda_unread_only_symbols_named_for_cuda_go_unjudged():
    wheels, natives = pick(*TORCH, "torchaudio==2.11.1")
    natives[0] = _unread(natives[0], "torch/lib/libtorch_cuda.so")
    report = judge_natives(wheels, natives, **TARGET)
    assert "torch_exception_get_what" in {f.missing for f in report.findings}
    assert report.unread == ("torch 2.11.0: torch/lib/libtorch_cuda.so",)
    wheels, natives = pick(*TORCH, "torchaudio==2.11.0")
    natives[0] = _unread(natives[0], "torch/lib/libtorch_cuda.so")
    assert judge_natives(wheels, natives, **TARGET).ok


def test_linkable_libraries_are_those_another_wheel_can_name():
    from stacklock.native.check import is_linkable

    for path in ("torch/lib/libc10.so", "nvidia/cu13/lib/libcudart.so.13",
                 "bitsandbytes/libbitsandbytes_cuda121.so",
                 "tensorflow/python/_pywrap_tensorflow_internal.so",
                 "pyarrow/libarrow.so.2600"):
        assert is_linkable(path), path
    for path in ("numpy/_core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                 "sgl_kernel/common_ops.abi3.so",
                 "numpy.libs/libscipy_openblas64_-56d6093b.so",
                 "scipy.libs/libgfortran-040039e1.so.5.0.0",
                 "numpy/.libs/libopenblasp-r0-8b9e111f.3.17.so",
                 "pypy/_cffi.pypy310-pp73-x86_64-linux-gnu.so"):
        assert not is_linkable(path), path


def test_only_wheels_a_finding_could_join_to_another_are_read():
    from stacklock.native.check import IF_NAMED, READ, SKIP, link_plan

    numpy = ["numpy/_core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
             "numpy.libs/libscipy_openblas64_-56d6093b.so"]
    scipy = ["scipy/linalg/_fblas.cpython-312-x86_64-linux-gnu.so",
             "scipy.libs/libgfortran-040039e1.so.5.0.0"]
    torch = ["torch/_C.cpython-312-x86_64-linux-gnu.so", "torch/lib/libc10.so"]
    pure: list[str] = []
    # self-contained wheels: nothing to read
    assert link_plan([numpy, scipy, pure]) == [SKIP, SKIP, SKIP]
    # a library another wheel may link: every other wheel with objects is
    # read; the library's own wheel when one of them names it
    assert link_plan([numpy, scipy, torch, pure]) == [READ, READ, IF_NAMED, SKIP]
    # the only wheel with a linkable library, and no other objects: alone
    assert link_plan([torch, pure]) == [SKIP, SKIP]
    # two linkable ones may link each other
    assert link_plan([torch, ["nvidia/cu13/lib/libcudart.so.13"]]) == [READ, READ]


def test_a_library_is_named_by_its_stem_in_any_major():
    from stacklock.native.check import names_a_library_of
    from stacklock.native.elf import SharedObject
    from stacklock.native.wheel import WheelNatives

    def wheel(*needed: str) -> WheelNatives:
        return WheelNatives(sha256="0" * 64, files=("a/_x.abi3.so",), objects=(
            SharedObject(path="a/_x.abi3.so", soname=None, needed=needed,
                         runpath=(), exported=(), undefined=()),))

    pyarrow = ["pyarrow/libarrow.so.2600",
               "pyarrow/lib.cpython-312-x86_64-linux-gnu.so",
               "pyarrow.libs/libz-8a8cbe8e.so.1.2.13"]
    assert names_a_library_of(wheel("libarrow.so.2600", "libc.so.6"), pyarrow)
    assert names_a_library_of(wheel("libarrow.so.2100"), pyarrow)  # another major
    assert not names_a_library_of(wheel("libc.so.6", "libm.so.6"), pyarrow)
    # a vendored copy or an extension module is no library another wheel names
    assert not names_a_library_of(wheel("libz-8a8cbe8e.so.1.2.13"), pyarrow)
    assert not names_a_library_of(wheel("libarrow.so.2600"), [])
