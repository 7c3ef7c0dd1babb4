"""Import checks inside a real venv, and the ABI diagnosis on a real extension that
fails to load with ``undefined symbol`` (compiled here with gcc)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stacklock.lock import load_lock
from stacklock.validate.imports import check_imports
from stacklock.validate.run import read_distributions
from tests.helpers.wheelkit import build_wheel, make_venv, uv_install, write_lock

# c10::TensorImpl::release_resources(): a libtorch symbol whose ABI moved between
# torch releases; here no library defines it at all.
SYMBOL = "_ZN3c1010TensorImpl17release_resourcesEv"
C_SOURCE = f"""
extern void {SYMBOL}(void);
void *PyInit_common_ops(void) {{ {SYMBOL}(); return 0; }}
"""


def _extension(folder: Path) -> bytes:
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "common_ops.c"
    source.write_text(C_SOURCE)
    out = folder / "common_ops.abi3.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(source)],
                   check=True, capture_output=True)
    return out.read_bytes()


@pytest.fixture
def broken_stack(tmp_path: Path) -> tuple[Path, Path]:
    """A venv with torch 2.11.0+cu130 and an sgl-kernel built for torch 2.9.1."""
    assert shutil.which("gcc"), "gcc is needed to build the test extension"
    wheels = tmp_path / "wheels"
    torch = build_wheel(wheels, "torch", "2.11.0+cu130",
                        {"torch/__init__.py": b"__version__ = '2.11.0+cu130'\n"})
    kernel = build_wheel(
        wheels, "sgl-kernel", "0.3.21+cu130",
        {"sgl_kernel/__init__.py": b"from sgl_kernel import common_ops\n",
         "sgl_kernel/common_ops.abi3.so": _extension(tmp_path / "build")},
        requires=("torch==2.9.1",), tag="cp310-abi3-linux_x86_64",
    )
    python = make_venv(tmp_path / "venv")
    uv_install(python, torch, kernel)
    lock = write_lock(tmp_path / "pylock.toml", [torch, kernel])
    return python, lock


def test_undefined_symbol_is_an_abi_mismatch(broken_stack: tuple[Path, Path]) -> None:
    python, lock_path = broken_stack
    lock = load_lock(lock_path)
    dists = read_distributions(python)
    assert dists["modules"]["sgl_kernel"] == ["sgl-kernel"]
    results = check_imports(python, ("torch", "sgl_kernel"), dists, lock)
    assert [(r.name, r.status) for r in results] == [
        ("import:torch", "pass"), ("import:sgl_kernel", "fail")]
    assert results[0].reason == "imports (2.11.0+cu130)"
    failed = results[1]
    assert failed.details["error_type"] == "ImportError"
    assert f"undefined symbol: {SYMBOL}" in failed.details["message"]
    assert failed.reason == (
        "ABI mismatch: common_ops.abi3.so in sgl-kernel 0.3.21+cu130 (cu130) "
        "(its metadata asks for torch==2.9.1) was built against another torch than "
        "torch 2.11.0+cu130 (cu130): undefined symbol "
        f"{SYMBOL} (c10::TensorImpl::release_resources()); lock a sgl-kernel wheel "
        "built for this torch, or the torch it was built for")


def test_other_import_failures_say_what(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "w", "badpkg", "1.0",
                        {"badpkg/__init__.py": b"raise RuntimeError('no GPU here')\n"})
    python = make_venv(tmp_path / "venv")
    uv_install(python, wheel)
    dists = read_distributions(python)
    results = check_imports(python, ("badpkg", "not_there", "json"), dists, None)
    assert [r.status for r in results] == ["fail", "fail", "pass"]
    assert results[0].reason == "import badpkg failed: RuntimeError: no GPU here"
    assert results[1].reason == ("import not_there failed: ModuleNotFoundError: "
                                 "No module named 'not_there'")


def _linked_extension(folder: Path) -> tuple[bytes, bytes]:
    """An extension module linked against libfoo.so.2, and a libfoo.so.3: the pair
    a wheel built for one major of a library meets beside the next one."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "foo.c").write_text("int foo(void) { return 3; }\n")
    for major in ("2", "3"):
        lib = folder / f"libfoo.so.{major}"
        subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{lib.name}",
                        "-o", str(lib), str(folder / "foo.c")],
                       check=True, capture_output=True)
    (folder / "ext.c").write_text(
        "extern int foo(void);\nvoid *PyInit_common_ops(void) { foo(); return 0; }\n")
    out = folder / "common_ops.abi3.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(folder / "ext.c"),
                    str(folder / "libfoo.so.2"), "-Wl,-rpath,$ORIGIN/../foo/lib"],
                   check=True, capture_output=True)
    return out.read_bytes(), (folder / "libfoo.so.3").read_bytes()


def test_a_library_that_cannot_be_opened_names_who_needs_it(tmp_path: Path) -> None:
    """A real failed load ("libfoo.so.2: cannot open shared object file"); the
    native reader reads the installed extension to say who needs it and what the
    venv has instead."""
    assert shutil.which("gcc"), "gcc is needed to build the test extension"
    ext, libfoo3 = _linked_extension(tmp_path / "build")
    wheels = tmp_path / "wheels"
    foo = build_wheel(wheels, "foo", "3.0", {"foo/lib/libfoo.so.3": libfoo3},
                      tag="py3-none-linux_x86_64")
    kernel = build_wheel(
        wheels, "sgl-kernel", "0.3.21",
        {"sgl_kernel/__init__.py": b"from sgl_kernel import common_ops\n",
         "sgl_kernel/common_ops.abi3.so": ext},
        tag="cp310-abi3-linux_x86_64",
    )
    python = make_venv(tmp_path / "venv")
    uv_install(python, foo, kernel)
    dists = read_distributions(python)
    [result] = check_imports(python, ("sgl_kernel",), dists, None)
    assert result.status == "fail"
    assert "libfoo.so.2: cannot open shared object file" in result.details["message"]
    assert result.reason.startswith(
        "import sgl_kernel failed: sgl_kernel/common_ops.abi3.so needs libfoo.so.2; "
        "the venv has foo/lib/libfoo.so.3 (sgl-kernel 0.3.21); lock a sgl-kernel "
        "built for the libraries the venv has")


def _driver_extension(folder: Path) -> bytes:
    """An extension that links libcuda.so.1 and calls cuInit, as sgl_kernel's
    common_ops does; linked against a stub here, loaded where no driver is."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stub.c").write_text("int cuInit(unsigned int f) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(folder / "libcuda.so.1"), str(folder / "stub.c")],
                   check=True, capture_output=True)
    (folder / "ext.c").write_text("extern int cuInit(unsigned int);\n"
                                  "void *PyInit_common_ops(void) { cuInit(0); "
                                  "return 0; }\n")
    out = folder / "common_ops.abi3.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(folder / "ext.c"),
                    "-Wl,--no-as-needed", str(folder / "libcuda.so.1")],
                   check=True, capture_output=True)
    return out.read_bytes()


# The two ways a loader hides the dynamic loader's words: sgl_kernel's re-raise
# with a message of its own that starts with a blank line (the cause inside it),
# and a bare ``raise ImportError() from exc`` (the cause only in the chain).
LOADERS = {
    "message": b'''import importlib.util, pathlib
errors = []
try:
    path = pathlib.Path(__file__).parent / "common_ops.abi3.so"
    spec = importlib.util.spec_from_file_location("common_ops", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
except Exception as exc:
    errors.append(exc)
details = "\\n".join(f"- {type(e).__name__}: {e}" for e in errors)
raise ImportError(f"""
[sgl_kernel] CRITICAL: Could not load any common_ops library!

Error details from previous import attempts:
{details}
""")
''',
    "chained": b'''try:
    from sgl_kernel import common_ops
except ImportError as exc:
    raise ImportError() from exc
''',
}


def _no_driver() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    return False


@pytest.mark.skipif(not _no_driver(), reason="this machine has the NVIDIA driver")
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_missing_driver_library_is_named_and_skipped_only_when_allowed(
        tmp_path: Path, loader: str) -> None:
    """A real dlopen failure behind a loader that hides it: the reason names
    libcuda.so.1, not ``ImportError: `` and nothing after it; --allow-no-gpu turns
    exactly that failure into a skip, never another one."""
    assert shutil.which("gcc"), "gcc is needed to build the test extension"
    kernel = build_wheel(
        tmp_path / "wheels", "sgl-kernel", "0.4.10",
        {"sgl_kernel/__init__.py": LOADERS[loader],
         "sgl_kernel/common_ops.abi3.so": _driver_extension(tmp_path / "build")},
        tag="cp310-abi3-linux_x86_64",
    )
    broken = build_wheel(tmp_path / "wheels", "badpkg", "1.0",
                         {"badpkg/__init__.py": b"raise ImportError()\n"})
    python = make_venv(tmp_path / "venv")
    uv_install(python, kernel, broken)
    dists = read_distributions(python)
    [failed, other] = check_imports(python, ("sgl_kernel", "badpkg"), dists, None)
    assert failed.status == "fail"
    assert failed.reason == (
        "import sgl_kernel failed: ImportError: libcuda.so.1: cannot open shared "
        "object file: No such file or directory (the NVIDIA driver's library, "
        "which no wheel ships: this machine has no driver, or the loader cannot "
        "see it)")
    assert other.reason == ("import badpkg failed: ImportError: (the exception has "
                            "no message)")
    [skipped, still] = check_imports(python, ("sgl_kernel", "badpkg"), dists, None,
                                     allow_no_gpu=True)
    assert skipped.status == "skip" and still.status == "fail"
    assert skipped.reason.startswith("needs the NVIDIA driver (libcuda.so.1; "
                                     "--allow-no-gpu): import sgl_kernel failed: ")


def test_real_sgl_kernel_message_without_a_driver() -> None:
    """What sglang-kernel 0.4.10 (pypi-cu130) really raised on a machine with no
    driver: a message whose first line is empty, the loader's words further down.
    The reason is that line, and the skip under --allow-no-gpu keys on it."""
    from stacklock.validate.imports import cause_line, diagnose_import

    recorded = Path(__file__).resolve().parents[1] / "data" / "validate" / "no-driver"
    result = json.loads((recorded / "import-sgl_kernel.json").read_text())
    assert result["message"].splitlines()[0] == ""
    assert cause_line(result) == ("ImportError: libcuda.so.1: cannot open shared "
                                  "object file: No such file or directory")
    assert diagnose_import(result, {}, None) == (
        "import sgl_kernel failed: ImportError: libcuda.so.1: cannot open shared "
        "object file: No such file or directory (the NVIDIA driver's library, "
        "which no wheel ships: this machine has no driver, or the loader cannot "
        "see it)")
