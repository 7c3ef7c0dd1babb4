"""Resolution: from a profile's requirements to one hash-pinned wheel per project.

:func:`stacklock.resolve.resolution.resolve_profile` returns a ``Resolution``;
:func:`stacklock.resolve.locking.lock_profile` turns one into a PEP 751 lock on
disk. The modules: ``model`` (requirements, candidates), ``rules`` (overrides,
constraints, pre-releases), ``source`` (lazy, prefetched candidates and
metadata), ``provider`` (the resolvelib glue), ``explain`` (conflicts),
``hashes`` (one sha256 per wheel) and ``memo`` (replaying an unchanged
resolution). Import from the module that defines a name: this package imports
nothing, so a replay (``memo``) loads no resolver.
"""
