"""Which of a wheel's shared objects an import of it loads, read from its sources.

A native finding breaks an import only when the object is loaded by it. cupy-cuda12x
13.4.1 ships ``cupy_backends/cuda/libs/cudnn...so``, which needs ``libcudnn.so.8``;
``import cupy`` never loads it (``cupy.cuda.cudnn`` is imported on first use), so a
stack with cuDNN 9 works until someone asks for cuDNN. torchaudio 2.11.1's
``import torchaudio`` loads ``lib/libtorchaudio.so`` by path, so its finding breaks
the import. This module tells the two apart statically, the way the interpreter
would walk the sources:

- the *start*: the wheel's top-level modules (``top_level.txt``, else the
  top-level packages and modules its files make), and the modules the profile's
  ``[validate] imports`` names;
- a Python module's imports are those its module-level code performs: ``import``
  and ``from ... import`` statements outside function bodies (in ``if``, ``try``
  and ``with`` blocks too: a guarded import still runs, and an extension whose
  load fails inside ``try`` leaves the package without it, as xformers 0.0.35
  does), relative ones resolved, each module's packages imported first, and
  ``importlib.import_module("...")`` / ``__import__`` with a literal name;
- an object is loaded by path when a module reached passes its name to a call
  in code that runs on import: a string argument equal to its file name, or its
  name up to the first dot (``_load_lib("libtorchaudio")``, ``find_spec("_C")``),
  or a glob matching the file name (``glob("_C*.so")``, torchao). Code that runs
  on import is the module's own statements and the bodies of its functions
  that they call by name (``_build_metadata = _register_extensions()``), not a
  method run later (cupyx's runtime report names ``'cudnn'``);
- an extension module reached by an import is loaded, and every object an
  object loaded names in ``DT_NEEDED`` (within the wheel) is loaded with it.

What an extension module imports in turn (Cython's imports live in its binary)
is not seen: such an object counts as not loaded unless a Python module or a
``DT_NEEDED`` entry reaches it.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "ModuleFacts",
    "loaded_objects",
    "module_name",
    "parse_module",
    "top_level_modules",
]

# an extension module's file: name.cpython-312-x86_64-linux-gnu.so, name.abi3.so,
# name.so (CPython's EXTENSION_SUFFIXES on Linux)
_EXTENSION = re.compile(
    r"^(?P<stem>[A-Za-z_]\w*)(?:\.(?:cpython|pypy)[-\w.]*|\.abi3)?\.so$")
_IMPORT_CALLS = {"import_module", "__import__"}


@dataclass(frozen=True, kw_only=True)
class ModuleFacts:
    """What a Python module's code does on import: the modules it imports
    (absolute dotted names, relative ones resolved) and the strings it passes
    to calls (candidates for loading by path)."""

    imports: tuple[str, ...]
    literals: tuple[str, ...]


def module_name(path: str) -> str | None:
    """``a.b`` for ``a/b.py`` and ``a/b/__init__.py``, ``a.b`` for
    ``a/b.cpython-312-x86_64-linux-gnu.so``; None for anything else."""
    parts = path.split("/")
    if any(not p.isidentifier() for p in parts[:-1]):
        return None
    leaf = parts[-1]
    if leaf == "__init__.py":
        return ".".join(parts[:-1]) or None
    if leaf.endswith(".py"):
        stem = leaf[:-3]
    else:
        m = _EXTENSION.match(leaf)
        if m is None:
            return None
        stem = m.group("stem")
    return ".".join([*parts[:-1], stem]) if stem.isidentifier() else None


def top_level_modules(names: Iterable[str], top_level_txt: str | None) -> list[str]:
    """The wheel's top-level modules: what ``top_level.txt`` lists, else every
    top-level package (a folder with ``__init__.py``) and module."""
    if top_level_txt is not None:
        listed = [line.strip() for line in top_level_txt.splitlines()]
        return sorted({m for m in listed if m and m.isidentifier()})
    found = set()
    for name in names:
        if name.count("/") == 1 and name.endswith("/__init__.py"):
            found.add(name.split("/")[0])
        elif "/" not in name:
            mod = module_name(name)
            if mod is not None:
                found.add(mod)
    return sorted(found)


def parse_module(source: bytes, name: str, *, is_package: bool) -> ModuleFacts:
    """The facts of module ``name`` (a package's ``__init__`` when
    ``is_package``) from its source; a file that does not parse imports
    nothing we can see."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in old sources
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ModuleFacts(imports=(), literals=())
    package = name if is_package else name.rpartition(".")[0]
    imports: list[str] = []
    literals: list[str] = []
    for node in _module_level(tree):
        if isinstance(node, ast.Call):
            literals.extend(_strings([*node.args, *(k.value for k in node.keywords)]))
        if isinstance(node, ast.Import):
            imports.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            if base is None:
                continue
            imports.append(base)
            imports.extend(f"{base}.{a.name}" for a in node.names if a.name != "*")
        elif isinstance(node, ast.Call) and _called(node) in _IMPORT_CALLS:
            imports.extend(_strings(node.args[:1]))
    return ModuleFacts(imports=tuple(dict.fromkeys(imports)),
                       literals=tuple(dict.fromkeys(literals)))


def loaded_objects(
    facts: Mapping[str, ModuleFacts],
    start: Iterable[str],
    objects: Mapping[str, Sequence[str]],
    sonames: Mapping[str, str] | None = None,
) -> set[str]:
    """The paths of the shared objects (``objects``: path -> its DT_NEEDED;
    ``sonames``: DT_SONAME -> path) that importing the ``start`` modules
    loads, given each Python module's ``facts`` (by dotted name)."""
    extensions = {module_name(p): p for p in objects if module_name(p) is not None}
    by_file: dict[str, list[str]] = {}
    for path in objects:
        base = path.rsplit("/", 1)[-1]
        by_file.setdefault(base, []).append(path)
        by_file.setdefault(base.split(".", 1)[0], []).append(path)
    reached: set[str] = set()
    loaded: set[str] = set()
    todo = [m for name in start for m in _with_packages(name)]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        if name in extensions:
            loaded.add(extensions[name])
        found = facts.get(name)
        if found is None:
            continue
        todo.extend(m for imp in found.imports for m in _with_packages(imp))
        for text in found.literals:
            loaded.update(_by_path(text, by_file, objects))
    return _with_needed(loaded, objects, sonames or {})


def _module_level(tree: ast.Module) -> Iterable[ast.AST]:
    """Every node the module's code runs on import: its own statements (class
    bodies included), and the bodies of its functions that this code calls by
    name, transitively (xformers' ``_register_extensions()``); not the bodies
    of functions nobody calls on import, which run when called."""
    functions = {n.name: n for n in tree.body
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    called: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in functions and node.func.id not in called:
            called.add(node.func.id)
            todo.extend(functions[node.func.id].body)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef |
                              ast.Lambda):
                todo.append(child)


def _absolute(module: str | None, level: int, package: str) -> str | None:
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    base = parts[:len(parts) - (level - 1)]
    if module:
        base.append(module)
    return ".".join(base) or None


def _called(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _strings(nodes: Iterable[ast.AST]) -> list[str]:
    return [n.value for n in nodes
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and 0 < len(n.value) <= 200]


def _with_packages(name: str) -> list[str]:
    """``a``, ``a.b``, ``a.b.c`` for ``a.b.c``: importing it runs each."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _by_path(text: str, by_file: Mapping[str, list[str]],
             objects: Mapping[str, Sequence[str]]) -> list[str]:
    """The objects a string names: its file name, its name up to the first
    dot, a glob of file names, or a path ending in one of them."""
    if any(c in text for c in "*?["):
        pattern = text.rsplit("/", 1)[-1]
        return [p for p in objects if fnmatch.fnmatchcase(p.rsplit("/", 1)[-1],
                                                          pattern)]
    found = by_file.get(text) or by_file.get(text.rsplit("/", 1)[-1]) or []
    return list(found)


def _with_needed(loaded: set[str], objects: Mapping[str, Sequence[str]],
                 sonames: Mapping[str, str]) -> set[str]:
    """``loaded`` and every object of the wheel they need, transitively (by
    soname, else by file name)."""
    by_name: dict[str, str] = dict(sonames)
    for path in objects:
        by_name.setdefault(path.rsplit("/", 1)[-1], path)
    out = set(loaded)
    todo = list(loaded)
    while todo:
        for soname in objects.get(todo.pop(), ()):
            found = by_name.get(soname)
            if found is not None and found not in out:
                out.add(found)
                todo.append(found)
    return out
