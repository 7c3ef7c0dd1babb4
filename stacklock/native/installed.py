"""The native reader on an installed venv: which installed shared object needs the
library an import could not open, and which versions of it the venv has.

``validate`` calls this when an import fails with "cannot open shared object
file", which names the missing soname but not who needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.native.elf import is_shared_object_name, parse_shared_object

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["explain_missing_soname"]


def _objects(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file()
                  and is_shared_object_name(p.name))


def explain_missing_soname(
    site_packages: Path, package: str, soname: str
) -> str | None:
    """"torchaudio/lib/libtorchaudio.so needs libcudart.so.12; the venv has
    nvidia/cu13/lib/libcudart.so.13", for the import package ``package``; None
    when none of its shared objects needs ``soname``."""
    needers = []
    for path in (*_objects(site_packages / package),
                 *_objects(site_packages / f"{package}.libs")):
        try:
            with path.open("rb") as fh:
                found = parse_shared_object(fh, path=path.name)
        except (OSError, ValueError):
            continue
        if found is not None and soname in found.needed:
            needers.append(str(path.relative_to(site_packages)))
    if not needers:
        return None
    stem = soname.split(".so", 1)[0]
    present = sorted(str(p.relative_to(site_packages))
                     for p in site_packages.rglob(f"{stem}.so*") if p.is_file())
    has = (f"the venv has {', '.join(present)}" if present
           else "nothing in the venv provides it")
    return f"{', '.join(needers)} needs {soname}; {has}"
