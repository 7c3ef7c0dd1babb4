"""Sonames that exist on the target without any wheel: the manylinux system
baseline, the NVIDIA driver's libraries, and the target's own libpython."""

from __future__ import annotations

from functools import cache
from importlib import resources

from stacklock.bounded import parse_json

__all__ = ["DRIVER_SONAMES", "baseline_sonames"]

# Installed by the NVIDIA driver, not by any wheel or toolkit; the lock records
# the driver it needs (tool.stacklock.cuda), and `install` checks it.
DRIVER_SONAMES = frozenset(("libcuda.so.1", "libnvidia-ml.so.1"))


@cache
def _policy() -> dict[str, object]:
    text = resources.files("stacklock").joinpath("data", "manylinux_sonames.json")
    data: dict[str, object] = parse_json(text.read_bytes())
    return data


def baseline_sonames(*, manylinux: str, platform: str, python: str) -> frozenset[str]:
    """What a ``manylinux`` ("2_28") ``platform`` system running CPython
    ``python`` ("3.12") provides to every wheel."""
    minor = int(manylinux.split("_")[1])
    policy = _policy()
    added = policy["added-at"]
    loader = policy["loader"]
    assert isinstance(added, dict) and isinstance(loader, dict)
    found = {s for at, names in added.items() if int(at) <= minor for s in names}
    if platform in loader:
        found.add(loader[platform])
    major_minor = ".".join(python.split(".")[:2])
    found.add(f"libpython{major_minor}.so.1.0")
    return frozenset(found | DRIVER_SONAMES)
