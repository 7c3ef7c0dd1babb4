"""A source tree's metadata from its ``pyproject.toml``, where PEP 621 makes it static.

A ``[project]`` table that lists none of the fields the resolver reads (version,
dependencies, optional-dependencies, requires-python) in ``dynamic`` is exactly
the metadata any backend will build from it, so no build is needed. Pure: bytes
in, METADATA bytes (Metadata-Version 2.4, as packaging writes it) or the reason
it is not static out.
"""

from __future__ import annotations

import tomllib
from typing import Any

from packaging.metadata import Metadata
from packaging.requirements import InvalidRequirement, Requirement

__all__ = ["static_metadata"]

# The [project] keys whose values the resolver reads.
_READ = ("version", "dependencies", "optional-dependencies", "requires-python")


def static_metadata(content: bytes) -> bytes | str:
    """METADATA built from ``pyproject.toml`` bytes, or why it cannot be (no
    ``[project]`` table, a field the resolver reads is dynamic, a value that
    is not valid)."""
    try:
        project = tomllib.loads(content.decode("utf-8")).get("project")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"pyproject.toml is not valid TOML ({exc})"
    if not isinstance(project, dict) or "name" not in project:
        return "pyproject.toml has no [project] name"
    dynamic = [k for k in project.get("dynamic", []) if k in _READ]
    if dynamic:
        return f"pyproject.toml marks {', '.join(dynamic)} as dynamic"
    if "version" not in project:
        return "pyproject.toml has no [project] version"
    try:
        raw = _raw(project)
        return bytes(Metadata.from_raw(raw).as_rfc822())  # type: ignore[arg-type]
    except (InvalidRequirement, ValueError, TypeError) as exc:
        return f"pyproject.toml [project] is not valid: {exc}"


def _raw(project: dict[str, Any]) -> dict[str, Any]:
    requires = [str(Requirement(r)) for r in project.get("dependencies", [])]
    extras = project.get("optional-dependencies", {})
    for extra, reqs in sorted(extras.items()):
        for text in reqs:
            req = Requirement(text)
            marker = f"extra == {extra!r}"
            if req.marker is not None:
                marker = f"({req.marker}) and {marker}"
            req.marker = None
            requires.append(f"{req}; {marker}")
    raw: dict[str, Any] = {"metadata_version": "2.4", "name": str(project["name"]),
                           "version": str(project["version"])}
    if requires:
        raw["requires_dist"] = requires
    if "requires-python" in project:
        raw["requires_python"] = str(project["requires-python"])
    if extras:
        raw["provides_extra"] = sorted(extras)
    return raw
