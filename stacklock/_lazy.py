"""Loading a whole module on first use (:func:`lazy_module`), for one that only
an error path needs, such as httpx in the modules whose GETs go through
:mod:`stacklock.httpget`."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: a light submodule should stay light

if TYPE_CHECKING:
    from typing import Any

__all__ = ["lazy_module"]


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
