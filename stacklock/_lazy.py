"""Names a package exports but loads on first use (PEP 562 module ``__getattr__``),
so importing one light submodule does not import the package's heavy ones."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: a light submodule should stay light

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


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
