"""What importing a package loads, from its sources (stacklock.native.imports).

Over the recorded facts of real wheels (tests/data/native/: imports.json.gz is
what each consumer's ``.py`` members import, facts.json.gz its shared objects):
torchaudio 2.11.1's import loads ``lib/libtorchaudio.so`` by path (its finding
breaks ``import torchaudio``), xformers 0.0.35's loads ``_C.so`` through
``find_spec("_C")`` in a function its module calls, cupy-cuda12x 13.4.1's does
not load ``cupy_backends.cuda.libs.cudnn`` (imported on first use) until the
profile's ``[validate] imports`` names ``cupy.cuda.cudnn``.
"""

from __future__ import annotations

import pytest

from stacklock.native.imports import (
    loaded_objects,
    module_name,
    parse_module,
    top_level_modules,
)
from tests.helpers.native_facts import load_facts, load_import_facts

CUDNN = "cupy_backends/cuda/libs/cudnn.cpython-312-x86_64-linux-gnu.so"


def _loaded(key: str, *extra: str) -> tuple[set[str], set[str]]:
    """(loaded, every object) of the recorded wheel ``package==version``."""
    wheel, natives = load_facts()[key]
    (facts,) = [f for f in load_import_facts() if f.sha256 == wheel.sha256]
    objects = {o.path: o.needed for o in natives.objects}
    sonames = {o.soname: o.path for o in natives.objects if o.soname}
    return (loaded_objects(facts.modules, [*facts.top_level, *extra], objects,
                           sonames), set(objects))


def test_torchaudio_loads_its_library_by_path_and_not_the_ctc_decoder():
    loaded, every = _loaded("torchaudio==2.11.1")
    assert loaded == {"torchaudio/lib/_torchaudio.so",
                      "torchaudio/lib/libtorchaudio.so"}
    assert every - loaded == {"torchaudio/lib/torchaudio_prefixctc.so"}


def test_xformers_loads_its_extension_from_a_function_its_module_calls():
    loaded, every = _loaded("xformers==0.0.35")
    assert loaded == every == {"xformers/_C.so"}


def test_cupy_leaves_its_cudnn_module_to_the_first_use():
    loaded, every = _loaded("cupy-cuda12x==13.4.1")
    assert "cupy/_core/core.cpython-312-x86_64-linux-gnu.so" in loaded
    assert CUDNN in every - loaded
    named, _ = _loaded("cupy-cuda12x==13.4.1", "cupy.cuda.cudnn")
    assert CUDNN in named


SOURCE = b'''
import os
from . import sibling
from .sub import thing, other
try:
    from pkg import _ext
except ImportError:
    _ext = None

def later():
    import never_at_import
    load("libnever")

def helper():
    load("libhelped")
    import helped_module

helper()
glob("_C*.so")
key == "compared"
'''


def test_parse_module_keeps_what_runs_on_import():
    facts = parse_module(SOURCE, "pkg.mod", is_package=False)
    assert set(facts.imports) == {"os", "pkg", "pkg.sibling", "pkg.sub",
                                  "pkg.sub.thing", "pkg.sub.other", "pkg._ext",
                                  "helped_module"}
    assert set(facts.literals) == {"libhelped", "_C*.so"}
    package = parse_module(b"from . import x\nfrom .. import y\n", "pkg.sub",
                           is_package=True)
    assert set(package.imports) == {"pkg.sub", "pkg.sub.x", "pkg", "pkg.y"}
    assert parse_module(b"def broken(:\n", "pkg", is_package=True).imports == ()


def test_loaded_objects_follows_imports_literals_and_needed():
    facts = {"pkg": parse_module(b"from pkg import core\n", "pkg", is_package=True),
             "pkg.core": parse_module(b'torch.ops.load_library("libops")\n',
                                      "pkg.core", is_package=False)}
    objects = {"pkg/_ext.abi3.so": (), "pkg/lib/libops.so": ("libdep.so.1",),
               "pkg/lib/libdep.so.1": (), "pkg/lib/libother.so": ()}
    assert loaded_objects(facts, ["pkg"], objects) == {
        "pkg/lib/libops.so", "pkg/lib/libdep.so.1"}
    assert loaded_objects(facts, ["pkg", "pkg._ext"], objects) == {
        "pkg/lib/libops.so", "pkg/lib/libdep.so.1", "pkg/_ext.abi3.so"}


@pytest.mark.parametrize(("path", "name"), [
    ("a/b.py", "a.b"), ("a/b/__init__.py", "a.b"), ("a/_C.so", "a._C"),
    ("a/b.cpython-312-x86_64-linux-gnu.so", "a.b"), ("a/b.abi3.so", "a.b"),
    ("a/lib/libfoo.so.1", None), ("a-b/c.py", None), ("a/README", None)])
def test_module_names(path, name):
    assert module_name(path) == name


def test_top_level_from_the_file_or_the_members():
    assert top_level_modules([], "cupy\ncupyx\n\n") == ["cupy", "cupyx"]
    assert top_level_modules(["pkg/__init__.py", "pkg/x.py", "mod.py",
                              "pkg.libs/libz.so", "pkg-1.dist-info/RECORD"],
                             None) == ["mod", "pkg"]
