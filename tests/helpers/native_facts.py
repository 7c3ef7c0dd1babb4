"""The recorded real facts of tests/data/native/ (facts.json.gz, imports.json.gz),
as checker types."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from stacklock.native.sources import ImportFacts
from stacklock.native.wheel import NativeWheel, WheelNatives

NATIVE = Path(__file__).resolve().parent.parent / "data" / "native"
MARKUPSAFE = next(NATIVE.glob("markupsafe-*.whl"))


def load_facts() -> dict[str, tuple[NativeWheel, WheelNatives]]:
    """``package==version`` -> (wheel, what its shared objects need and export)."""
    data = json.loads(gzip.decompress((NATIVE / "facts.json.gz").read_bytes()))
    out = {}
    for record in data["wheels"]:
        wheel = NativeWheel(**record["wheel"])
        out[f"{wheel.package}=={wheel.version}"] = (
            wheel, WheelNatives.from_dict(record["natives"]))
    return out


def pick(*keys: str) -> tuple[list[NativeWheel], list[WheelNatives]]:
    facts = load_facts()
    chosen = [facts[k] for k in keys]
    return [w for w, _ in chosen], [n for _, n in chosen]


def load_import_facts() -> list[ImportFacts]:
    """What each consumer's Python modules import (imports.json.gz)."""
    data = json.loads(gzip.decompress((NATIVE / "imports.json.gz").read_bytes()))
    return [ImportFacts.from_dict(record) for record in data["wheels"]]
