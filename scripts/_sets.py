"""Requirement sets for the scripts that compare stacklock with uv, and the
profile that resolves one for the target both tools are asked for.

A set is a requirements file of a public repository (tests/data/requirement-sets/,
provenance in its sets.toml) or a list in scripts/resolve_sets.toml. Lines that
are not PEP 508 requirements (pip options such as ``--extra-index-url``, an
editable or bare URL install) are left out, with the reason, and given to
neither tool. Importable as ``_sets`` by the scripts and as ``scripts._sets`` by
the tests: it imports nothing from scripts/.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

SETS = Path(__file__).resolve().parent.parent / "tests" / "data" / "requirement-sets"
PYTHON, PLATFORM, MANYLINUX = "3.12", "x86_64-manylinux_2_28", "2_28"


@dataclass(frozen=True)
class RequirementSet:
    name: str
    requirements: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...] = ()  # (line, why)
    source: str = ""  # repo/path@commit


def parse_requirements_text(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The PEP 508 lines of a requirements file, and the others with the
    reason they are left out."""
    found: list[str] = []
    left: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            left.append((line, "a pip option, not a requirement"))
            continue
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            left.append((line, f"not PEP 508: {str(exc).splitlines()[0]}"))
            continue
        found.append(line)
    return found, left


def read_sets(folder: Path = SETS) -> list[RequirementSet]:
    """Every set of ``folder`` (its sets.toml names them and their source)."""
    index = tomllib.loads((folder / "sets.toml").read_text())
    out = []
    for name, where in index.items():
        found, left = parse_requirements_text((folder / f"{name}.txt").read_text())
        out.append(RequirementSet(
            name=name, requirements=tuple(found), left_out=tuple(left),
            source=f"{where['repo']}/{where['path']}@{where['commit']}"))
    return out


def profile_text(requirements: list[str] | tuple[str, ...], *,
                 exclude_newer: str | None = None,
                 allow_mixed: list[str] | tuple[str, ...] = (),
                 manylinux: str = MANYLINUX) -> str:
    """A stacklock profile resolving ``requirements`` for CPython {PYTHON} on
    x86_64 ``manylinux`` (a glibc floor), as uv pip compile is asked to."""
    quoted = ", ".join(json.dumps(r) for r in requirements)
    cutoff = f"exclude-newer = {json.dumps(exclude_newer)}\n" if exclude_newer else ""
    mixed = f"[cuda]\nallow-mixed = {json.dumps(list(allow_mixed))}\n" \
        if allow_mixed else ""
    return ('[profile]\ndescription = "a requirement set"\n[target]\n'
            f'python = "{PYTHON}"\nplatform = "linux_x86_64"\n'
            f'manylinux = "{manylinux}"\n[requirements]\npackages = [{quoted}]\n'
            f"{cutoff}{mixed}")


def parse_pins(text: str) -> dict[str, str]:
    """``name==version`` lines (uv pip compile's output) as {project: version}."""
    pins = {}
    for line in text.splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            pins[str(canonicalize_name(name.split("[")[0]))] = version.strip()
    return pins
