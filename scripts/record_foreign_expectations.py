"""Record what ``packaging.pylock.Pylock.select()`` installs from each lock of
tests/data/foreign-locks/ for CPython 3.12 and 3.13 on manylinux_2_28 x86_64:
the reference the corpus test holds stacklock's install plan to.

Uses packaging alone (never stacklock's planner), so the expectations stay an
independent answer. Run: python scripts/record_foreign_expectations.py
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from packaging.pylock import (
    PackageArchive,
    PackageDirectory,
    PackageVcs,
    Pylock,
    PylockSelectError,
    PylockValidationError,
)
from packaging.tags import compatible_tags, cpython_tags

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "foreign-locks"
PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(28, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
    "linux_x86_64"]


def environment(minor: int) -> dict[str, str]:
    full = f"3.{minor}.0"
    return {"implementation_name": "cpython", "implementation_version": full,
            "os_name": "posix", "platform_machine": "x86_64",
            "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": "Linux", "platform_version": "",
            "python_full_version": full, "python_version": f"3.{minor}",
            "sys_platform": "linux"}


def source_of(source: object) -> str:
    """The chosen source as one string: a file name, ``vcs url@commit``, ..."""
    if isinstance(source, PackageVcs):
        return f"vcs {source.url or source.path}@{source.commit_id}"
    if isinstance(source, PackageDirectory):
        return f"directory {source.path}"
    if isinstance(source, PackageArchive):
        return f"archive {source.url or source.path}"
    return str(source.filename)  # type: ignore[attr-defined]


def select(path: Path, minor: int) -> dict[str, object]:
    try:
        lock = Pylock.from_dict(tomllib.loads(path.read_text("utf-8")))
    except PylockValidationError as exc:
        return {"invalid": str(exc)}
    tags = [*cpython_tags((3, minor), platforms=PLATFORMS),
            *compatible_tags((3, minor), f"cp3{minor}", PLATFORMS)]
    try:
        chosen = list(lock.select(environment=environment(minor),  # type: ignore[arg-type]
                                  tags=tags))
    except PylockSelectError as exc:
        return {"refused": str(exc)}
    return {"selected": {str(p.name): source_of(s) for p, s in chosen}}


def main() -> int:
    out = {path.name: {f"3.{m}": select(path, m) for m in (12, 13)}
           for path in sorted(CORPUS.glob("*.toml"))}
    target = CORPUS / "expected-select.json"
    target.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", "utf-8")
    print(f"wrote {target.relative_to(ROOT)}: {len(out)} locks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
