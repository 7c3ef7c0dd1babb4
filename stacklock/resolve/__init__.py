"""Resolution: from a profile's requirements to one hash-pinned wheel per project.

``resolve_profile(profile)`` returns a :class:`Resolution`; ``stacklock.lock`` turns
it into a PEP 751 lock. See ``model`` (requirements, candidates), ``rules``
(overrides, constraints, pre-releases), ``source`` (lazy, prefetched candidates and
metadata), ``provider`` (the resolvelib glue), ``explain`` (conflicts) and
``hashes`` (one sha256 per wheel).
"""

from __future__ import annotations

from stacklock.resolve.resolution import Resolution, ResolvedPackage, resolve_profile
from stacklock.resolve.rules import AppliedOverride

__all__ = ["AppliedOverride", "Resolution", "ResolvedPackage", "resolve_profile"]
