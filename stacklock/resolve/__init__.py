"""Resolution: from a profile's requirements to one hash-pinned wheel per project.

``resolve_profile(profile)`` returns a :class:`Resolution`; ``stacklock.lock`` turns
it into a PEP 751 lock. See ``model`` (requirements, candidates), ``rules``
(overrides, constraints, pre-releases), ``source`` (lazy, prefetched candidates and
metadata), ``provider`` (the resolvelib glue), ``explain`` (conflicts),
``hashes`` (one sha256 per wheel) and ``memo`` (replaying an unchanged
resolution). The names below load their module on first use (PEP 562): a replay
imports no resolver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock._lazy import lazy_exports

if TYPE_CHECKING:
    from stacklock.resolve.resolution import (
        Resolution,
        ResolvedPackage,
        resolve_profile,
    )
    from stacklock.resolve.rules import AppliedOverride

_HOME = {"Resolution": "resolution", "ResolvedPackage": "resolution",
         "resolve_profile": "resolution", "AppliedOverride": "rules"}

__all__ = ["AppliedOverride", "Resolution", "ResolvedPackage", "resolve_profile"]


__getattr__ = lazy_exports(__name__, _HOME)
