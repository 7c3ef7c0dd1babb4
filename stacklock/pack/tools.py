"""The tools a pack carries so that a node with only Python can install it:
stacklock itself (as a wheel made from the running code) and everything it
requires, uv included, resolved by stacklock for the lock's target. matplotlib
(the ``plots`` extra, with numpy ~60 MB) comes only when asked for: without it
the node's validate report is written without its plots."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement

import stacklock
from stacklock.profile import parse_profile
from stacklock.record import record_digest
from stacklock.resolve.resolution import resolve_profile

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from stacklock.resolve.hashes import LockedWheel
    from stacklock.target import Target

__all__ = ["PLOTS_EXTRA", "ZIP_TIME", "make_self_wheel", "resolve_tools", "zip_entry"]

ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: fixed bytes
PLOTS_EXTRA = "plots"
# The tools resolve as of the lock's cut-off (the same lock, the same pack bytes),
# but never before the day every requirement of this stacklock had a release:
# packaging 26.4 (Pylock.select() refusing undeclared extras and groups) came out
# 2026-11-23. Moved forward whenever a requirement's floor is raised.
TOOLS_NOT_BEFORE = datetime(2026, 11, 24, tzinfo=UTC)


def zip_entry(zf: zipfile.ZipFile, name: str, data: bytes, *,
              executable: bool = False) -> None:
    """One stored entry with fixed time and mode, so equal inputs give equal bytes."""
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.external_attr = (0o755 if executable else 0o644) << 16
    info.compress_type = zipfile.ZIP_STORED
    zf.writestr(info, data)


def _requirements(extra: str = "") -> list[str]:
    """stacklock's own Requires-Dist: those it always needs, or (``extra``) the
    ones only that extra adds, without their ``extra == ...`` marker."""
    out = []
    for text in metadata.requires("stacklock") or ():
        req = Requirement(text)
        always = req.marker is None or req.marker.evaluate({"extra": ""})
        if not extra and always:
            out.append(str(req))
        elif extra and not always and req.marker is not None \
                and req.marker.evaluate({"extra": extra}):
            req.marker = None
            out.append(str(req))
    return sorted(out)


def make_self_wheel() -> tuple[str, bytes]:
    """A py3-none-any wheel of the stacklock that is running: its package files
    (no byte code), METADATA with its requirements, the ``stacklock`` script."""
    version = stacklock.__version__
    root = Path(stacklock.__file__).parent
    files = {
        "stacklock/" + p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    dist = f"stacklock-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", "Name: stacklock", f"Version: {version}",
            "Requires-Python: >=3.11",
            *(f"Requires-Dist: {r}" for r in _requirements()),
            f"Provides-Extra: {PLOTS_EXTRA}",
            *(f"Requires-Dist: {r}; extra == '{PLOTS_EXTRA}'"
              for r in _requirements(PLOTS_EXTRA))]
    files[f"{dist}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{dist}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: stacklock pack\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    files[f"{dist}/entry_points.txt"] = (
        b"[console_scripts]\nstacklock = stacklock.cli:run\n")
    record = [f"{name},{record_digest(data)},{len(data)}"
              for name, data in sorted(files.items())]
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zip_entry(zf, name, data)
    return f"stacklock-{version}-py3-none-any.whl", buf.getvalue()


def resolve_tools(
    target: Target,
    *,
    http: httpx.Client | None = None,
    cache_dir: Path | None = None,
    exclude_newer: datetime | None = None,
    with_plots: bool = False,
    on_status: Callable[[str], None] | None = None,
) -> list[LockedWheel]:
    """One wheel per project stacklock needs at run time, for ``target``: the
    same resolver and hash rules as any lock (PyPI, sha256 for each wheel), as
    of ``exclude_newer`` but not before :data:`TOOLS_NOT_BEFORE`; ``with_plots``
    adds the ``plots`` extra (matplotlib) for the report's plots."""
    packages = _requirements() + (_requirements(PLOTS_EXTRA) if with_plots else [])
    requirements: dict[str, object] = {"packages": packages}
    if exclude_newer is not None:
        requirements["exclude-newer"] = max(exclude_newer, TOOLS_NOT_BEFORE)
    profile = parse_profile({"target": target.to_dict(), "requirements": requirements},
                            name="stacklock-tools")
    resolution = resolve_profile(profile, http=http, cache_dir=cache_dir,
                                 on_status=on_status)
    return [p.wheel for p in resolution.packages if p.wheel is not None]
