"""An sdist's ``pyproject.toml`` ``[project]`` table as the metadata its wheel will
have (PEP 621), where the table says so.

PEP 621: a field of ``[project]`` that is not listed in ``dynamic`` is the field's
final value, and a backend must not fill in one that is absent. So when
``dependencies``, ``optional-dependencies`` and ``requires-python`` are all static,
the resolver's fields are known without running the backend (uv reads them the
same way). The answer is written as METADATA bytes, so that it is parsed, checked
against the file name and cached as every other metadata is.

Everything here is a pure function of bytes.
"""

from __future__ import annotations

from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from stacklock.bounded import Malformed, parse_toml

__all__ = ["STATIC_FIELDS", "static_project_metadata"]

# The [project] keys the resolver's fields come from.
STATIC_FIELDS = ("dependencies", "optional-dependencies", "requires-python")


def static_project_metadata(raw: bytes, *, project: str | None = None,
                            version: str | None = None) -> bytes | str:
    """METADATA for the sdist of ``project`` ``version`` (its file name's) from
    its pyproject.toml ``raw``, or why it cannot be had from there. Without
    ``project`` and ``version`` (a source folder or repository, which has no
    file name) the table must state both."""
    try:
        data = parse_toml(raw)
    except Malformed as exc:
        return f"pyproject.toml cannot be read ({exc})"
    table = data.get("project")
    if not isinstance(table, dict):
        return "pyproject.toml has no [project] table"
    dynamic = table.get("dynamic", [])
    if not isinstance(dynamic, list):
        return "pyproject.toml [project] dynamic is not a list"
    named = [f for f in STATIC_FIELDS if f in dynamic]
    if named:
        return f"pyproject.toml [project] lists {', '.join(named)} as dynamic"
    name = table.get("name")
    if not isinstance(name, str):
        return "pyproject.toml has no [project] name"
    if project is not None and canonicalize_name(name) != canonicalize_name(project):
        return f"pyproject.toml [project] name is {name!r}, not {project}"
    stated = table.get("version")
    if not isinstance(stated, str) or "version" in dynamic:
        if version is None:
            return "pyproject.toml does not state its [project] version"
        stated = version
    try:
        lines = _fields(table)
    except (InvalidRequirement, InvalidSpecifier, TypeError, ValueError) as exc:
        return f"pyproject.toml [project] cannot be read ({exc})"
    head = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {stated}"]
    return ("\n".join(head + lines) + "\n").encode("utf-8")


def _fields(table: dict[str, Any]) -> list[str]:
    """``Requires-Python``, ``Requires-Dist`` and ``Provides-Extra`` lines."""
    lines = []
    python = table.get("requires-python")
    if python is not None:
        lines.append(f"Requires-Python: {SpecifierSet(_text(python))}")
    lines += [f"Requires-Dist: {Requirement(_text(r))}"
              for r in _list(table.get("dependencies", []))]
    extras = table.get("optional-dependencies", {})
    if not isinstance(extras, dict):
        raise TypeError("optional-dependencies is not a table")
    for extra, reqs in extras.items():
        name = canonicalize_name(_text(extra), validate=True)
        lines.append(f"Provides-Extra: {name}")
        for text in _list(reqs):
            req = Requirement(_text(text))
            marker = f'extra == "{name}"'
            if req.marker is not None:
                marker = f"({req.marker}) and {marker}"
            req.marker = None
            lines.append(f"Requires-Dist: {req} ; {marker}")
    return lines


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value
