"""Loading on first use: the names a package exports (PEP 562 module
``__getattr__``), so importing one light submodule does not import the package's
heavy ones; and a whole module (:func:`lazy_module`), for one that only an error
path needs, such as httpx in the modules whose GETs go through
:mod:`stacklock.httpget`."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: a light submodule should stay light

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports", "lazy_module"]


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``homes`` maps each exported name to
    the submodule that defines it; a name is imported once, then kept."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__


class _LazyModule:
    """Stands for a module and imports it at the first attribute asked for
    (``importlib.import_module`` is thread-safe); an ``except`` clause naming
    ``module.Error`` imports it only when an exception reaches the clause."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported at first use>"


def lazy_module(name: str) -> Any:
    """A stand-in for module ``name`` that imports it at first use."""
    return _LazyModule(name)
