"""An sdist's PKG-INFO, and whether its dependencies can be trusted (PEP 643).

An sdist's ``PKG-INFO`` is the metadata the wheel built from it will have only when
its Metadata-Version is 2.2 or later (PEP 643) and the fields the resolver reads
(``Requires-Dist``, ``Requires-Python``, ``Provides-Extra``) are not listed as
``Dynamic``. Otherwise the backend computes them at build time (a ``setup.py``
that reads the interpreter, the platform or an environment variable) and only
PEP 517 ``prepare_metadata_for_build_wheel`` gives the real answer.

Everything here is a pure function of bytes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from stacklock.metadata.parse import parse_metadata

if TYPE_CHECKING:
    from stacklock.metadata.parse import WheelMetadata

__all__ = [
    "RESOLVER_FIELDS",
    "is_pkg_info_member",
    "parse_pkg_info",
    "top_member",
    "untrusted_reason",
]

# The fields the resolver reads; if any is dynamic, PKG-INFO may differ from the
# wheel the sdist builds.
RESOLVER_FIELDS = ("requires-dist", "requires-python", "provides-extra")
_STATIC_FROM = Version("2.2")
_TOP_MEMBER = re.compile(r"(?:\./)?[^/]+/(PKG-INFO|pyproject\.toml)")


def top_member(name: str) -> str | None:
    """``PKG-INFO`` or ``pyproject.toml`` when ``name`` is the sdist's own file
    (``<top>/PKG-INFO``, not an ``*.egg-info`` copy), else None."""
    found = _TOP_MEMBER.fullmatch(name)
    return found.group(1) if found else None


def is_pkg_info_member(name: str) -> bool:
    """``<top>/PKG-INFO``: the sdist's own file, not an ``*.egg-info`` copy."""
    return top_member(name) == "PKG-INFO"


def untrusted_reason(raw: bytes) -> str | None:
    """Why PKG-INFO ``raw`` cannot stand in for the built wheel's METADATA, or
    None when it can (PEP 643: Metadata-Version >= 2.2, resolver fields static)."""
    from packaging.metadata import parse_email  # the email parser: ~20 modules

    fields, _unparsed = parse_email(raw)
    text = fields.get("metadata_version")
    try:
        version = Version(text) if text else None
    except InvalidVersion:
        version = None
    if version is None or version < _STATIC_FROM:
        return f"PKG-INFO is Metadata-Version {text or 'unknown'} (before 2.2, PEP 643)"
    dynamic = {d.lower() for d in fields.get("dynamic", [])}
    named = [f for f in RESOLVER_FIELDS if f in dynamic]
    if named:
        return f"PKG-INFO marks {', '.join(named)} as dynamic"
    return None


def parse_pkg_info(raw: bytes, filename: str, *, where: str | None = None
                   ) -> WheelMetadata:
    """PKG-INFO (or METADATA a backend prepared) of the sdist ``filename``,
    checked against the file name's project and version."""
    return parse_metadata(raw, filename, where=where or filename)
