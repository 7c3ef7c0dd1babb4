"""Reading a verb's ``--json`` output in tests: parsed, and checked against the
JSON Schema its ``schema`` key names (``docs/schemas/<kind>.schema.json``), so
every test that reads one also holds it to its documented schema."""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

from tests.helpers.data import ROOT

SCHEMAS = ROOT / "docs" / "schemas"
PREFIX = "urn:stacklock:schema:"


@functools.cache
def schemas() -> dict[str, dict[str, Any]]:
    """Every schema by its kind (``diff``), each itself a valid JSON Schema."""
    found = {}
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        schema = json.loads(path.read_text("utf-8"))
        Draft202012Validator.check_schema(schema)
        kind = path.name.removesuffix(".schema.json")
        assert schema["$id"] == PREFIX + kind, path
        found[kind] = schema
    return found


@functools.cache
def _registry() -> Registry:
    return Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema))
        for schema in schemas().values())


def check_document(data: Any, kind: str | None = None) -> dict[str, Any]:
    """``data`` (a parsed ``--json`` output) valid against the schema it names;
    ``kind``: the one it must name."""
    assert isinstance(data, dict), f"not a JSON object: {type(data).__name__}"
    name = data.get("schema")
    assert isinstance(name, str) and name.startswith("stacklock."), name
    found, _, version = name.removeprefix("stacklock.").partition("/")
    if kind is not None:
        assert found == kind, f"schema {name}, expected stacklock.{kind}/1"
    assert version == "1" and found in schemas(), f"no schema {name} in {SCHEMAS}"
    validator = Draft202012Validator(schemas()[found], registry=_registry())
    error = best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(top)"
        raise AssertionError(f"{name} at {where}: {error.message}")
    return data


def parse_output(text: str, kind: str | None = None) -> dict[str, Any]:
    """The text a verb printed with ``--json``: one JSON object whose first key
    is ``schema``, valid against that schema."""
    assert text.lstrip().startswith('{\n  "schema": "stacklock.'), text[:200]
    return check_document(json.loads(text), kind)
