"""stacklock: turn a declarative GPU software stack into an exact, hash-pinned,
installable and verifiable lock."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
