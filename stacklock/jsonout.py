"""The one shape of every ``--json`` output.

An object whose first key names its schema and version (``"schema":
"stacklock.diff/1"``), then the verb's fields, snake_case, every object's keys
sorted (the same result gives the same bytes). A key that is data (a package
name, a host, a lock's own key path such as ``target.gpu-arch``) is kept as it
is. Each schema is a JSON Schema in ``docs/schemas/`` and a section of
``docs/formats.md``; a field added keeps the version, a field renamed, removed
or retyped raises it. Standard library only: the pack's bootstrap prints
``list --json`` with it too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SCHEMA_VERSION", "json_document", "schema_name"]

SCHEMA_VERSION = 1


def schema_name(kind: str) -> str:
    """``diff`` -> ``stacklock.diff/1``."""
    return f"stacklock.{kind}/{SCHEMA_VERSION}"


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_sorted(v) for v in value]
    return value


def json_document(kind: str, data: Mapping[str, Any]) -> str:
    """The text ``--json`` prints for a result of schema ``kind``."""
    if "schema" in data:
        raise ValueError(f"{kind}: 'schema' is the document's own key")
    document = {"schema": schema_name(kind), **_sorted(dict(data))}
    return json.dumps(document, indent=2, default=str) + "\n"
