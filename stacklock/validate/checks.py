"""Named checks of an installed venv against its lock: each a pass/fail/skip with a
one-line reason, so a failing validate says which layer is wrong.

What uv really records (checked with uv 0.13): ``INSTALLER`` ("uv"), ``RECORD`` (a
sha256 per installed file) and, for direct URLs only, ``direct_url.json`` with an
empty ``archive_info``. No wheel hash survives an install, so the wheel-hash check
compares the installed ``RECORD`` with the ``RECORD`` inside the locked wheel, found by
its sha256 in the artifact cache or, for the wheels uv downloaded and checked against
the lock, in uv's cache (:mod:`~stacklock.validate.uv_cache`): equal entries mean the
files came from that wheel.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock import runner
from stacklock._fs import cache_dir, file_digest
from stacklock.lock import wheel_sha256
from stacklock.store import ArtifactStore
from stacklock.validate.uv_cache import find_uv_archives, uv_cache_dir

if TYPE_CHECKING:
    from packaging.pylock import PackageSdist

    from stacklock.lock import Lock

__all__ = [
    "FAIL",
    "MEASURED",
    "PASS",
    "SKIP",
    "CheckResult",
    "check_distributions",
    "check_uv_pip_check",
    "check_wheel_hashes",
    "needs_driver",
    "parse_uv_pip_check",
]

PASS, FAIL, SKIP = "pass", "fail", "skip"
# a number reported with no threshold to judge it: never a pass, never a failure
MEASURED = "measured"
STATUSES = (PASS, FAIL, SKIP, MEASURED)
BOOTSTRAP = {"pip", "setuptools", "wheel"}   # seeded by `uv venv --seed`: noted only
# The driver's user-space library: installed with the kernel driver, never by a
# wheel (libcudart, the toolkit's runtime, is another library and comes in wheels).
_NO_DRIVER = re.compile(r"\b(?P<soname>libcuda\.so(?:\.\d+)*): cannot open shared "
                        r"object file")


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    name: str
    status: str                      # "pass" | "fail" | "skip" | "measured"
    reason: str
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status,
                               "reason": self.reason}
        if self.notes:
            out["notes"] = list(self.notes)
        if self.details:
            out["details"] = self.details
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        return cls(name=data["name"], status=data["status"], reason=data["reason"],
                   notes=tuple(data.get("notes", ())),
                   details=dict(data.get("details", {})))


def needs_driver(message: str) -> str | None:
    """The driver library (``libcuda.so.1``) a loader error says is missing, if
    that is what it says; a machine without the NVIDIA driver has none."""
    found = _NO_DRIVER.search(message)
    return found["soname"] if found else None


def _installed(dists: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {canonicalize_name(d["name"]): d for d in dists.get("distributions", [])}


def _same_version(a: str, b: Version | None) -> bool:
    try:
        return b is not None and Version(a) == b
    except InvalidVersion:
        return False


def check_distributions(lock: Lock, dists: dict[str, Any]) -> CheckResult:
    """Names and versions installed equal the lock, nothing missing, nothing extra."""
    installed = _installed(dists)
    missing = sorted(n for n in lock.by_name if n not in installed)
    wrong = sorted(
        f"{n} {installed[n]['version']} (locked {p.version})"
        for n, p in lock.by_name.items()
        if n in installed and not _same_version(installed[n]["version"], p.version)
    )
    extra = sorted(n for n in installed if n not in lock.by_name)
    notes = tuple(f"{n} is installed but not locked (venv bootstrap tool)"
                  for n in extra if n in BOOTSTRAP)
    extra = [n for n in extra if n not in BOOTSTRAP]
    details = {"locked": len(lock.by_name), "installed": len(installed),
               "missing": missing, "wrong_version": wrong, "not_locked": extra}
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing ({', '.join(missing[:5])}"
                        f"{', ...' if len(missing) > 5 else ''})")
    if wrong:
        problems.append(f"{len(wrong)} at another version ({'; '.join(wrong[:3])}"
                        f"{'; ...' if len(wrong) > 3 else ''})")
    if extra:
        problems.append(f"{len(extra)} not in the lock ({', '.join(extra[:5])}"
                        f"{', ...' if len(extra) > 5 else ''})")
    if problems:
        return CheckResult(name="distributions", status=FAIL,
                           reason="; ".join(problems), notes=notes, details=details)
    return CheckResult(name="distributions", status=PASS,
                       reason=f"all {len(lock.by_name)} locked distributions "
                       "installed at the locked versions", notes=notes, details=details)


def _artifact_path(sha256: str) -> Path | None:
    """The locked wheel in the content-addressed store, if it was ever downloaded."""
    return ArtifactStore(cache_dir() / "artifacts").path_for(sha256)


class _WheelLocator:
    """Where a locked wheel's bytes (or uv's unpacking of them) are: the artifact
    store first, else uv's cache, looked through once for the whole lock."""

    def __init__(self, lock: Lock) -> None:
        self._lock = lock
        self._uv: dict[str, Path] | None = None

    def __call__(self, sha256: str) -> Path | None:
        stored = _artifact_path(sha256)
        if stored is not None:
            return stored
        if self._uv is None:
            wanted = {h: w.filename for p in self._lock.packages
                      for w in p.wheels if (h := wheel_sha256(w))}
            cache = uv_cache_dir()
            self._uv = find_uv_archives(cache, wanted) if cache else {}
        return self._uv.get(sha256)


def _record(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1]:
            out[parts[0]] = parts[1]
    return out


def _wheel_record(wheel: Path) -> str:
    """The RECORD inside a wheel: a ``.whl`` in the artifact store, or the
    folder uv unpacked it into (which keeps the wheel's RECORD as it was)."""
    if wheel.is_dir():
        return next(wheel.glob("*.dist-info/RECORD")).read_text(encoding="utf-8")
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist()
                    if n.endswith(".dist-info/RECORD") and n.count("/") == 1)
        return zf.read(name).decode("utf-8")


def _compare_record(wheel: Path, dist_info: Path) -> list[str]:
    """Paths whose installed hash differs from the wheel's RECORD (``*.data`` and
    RECORD itself are rewritten by installers and left out)."""
    installed = _record((dist_info / "RECORD").read_text(encoding="utf-8"))
    expected = _record(_wheel_record(wheel))
    return sorted(
        path for path, digest in expected.items()
        if ".data/" not in path and not path.endswith(".dist-info/RECORD")
        and installed.get(path) != digest
    )


def check_wheel_hashes(lock: Lock, dists: dict[str, Any]) -> CheckResult:
    """Installed files came from the locked wheel (by RECORD), where it is cached;
    a distribution built from a locked sdist is named, and the sdist in the cache
    is checked against the locked sha256 instead."""
    installed = _installed(dists)
    locate = _WheelLocator(lock)
    verified: list[str] = []
    mismatched: list[str] = []
    uncached: list[str] = []
    not_uv: list[str] = []
    built: list[str] = []
    for name, pkg in sorted(lock.by_name.items()):
        dist = installed.get(name)
        if dist is None or not dist.get("dist_info"):
            continue
        if not _same_version(dist["version"], pkg.version):
            continue  # the distributions check reports it
        if dist.get("installer") not in (None, "uv"):
            not_uv.append(f"{name} ({dist['installer']})")
        if pkg.sdist is not None:
            _check_sdist(name, pkg.sdist, built=built, mismatched=mismatched,
                         uncached=uncached)
            continue
        wheels = [(w.filename, h) for w in pkg.wheels if (h := wheel_sha256(w))]
        paths = [(f, p) for f, h in wheels if (p := locate(h)) is not None]
        if not paths:
            uncached.append(name)
            continue
        results = {f: _compare_record(p, Path(dist["dist_info"])) for f, p in paths}
        if any(not diff for diff in results.values()):
            verified.append(name)
        else:
            filename, diff = next(iter(results.items()))
            mismatched.append(f"{name}: {len(diff)} files differ from {filename} "
                              f"(first: {diff[0]})")
    details = {"verified": verified, "mismatched": mismatched,
               "not_in_artifact_cache": uncached, "other_installer": not_uv,
               "built_from_source": built}
    notes = []
    if built:
        notes.append("built from source on install (sdist sha256 checked): "
                     + ", ".join(built))
    if uncached:
        notes.append(f"{len(uncached)} wheels in neither the artifact cache nor uv's "
                     "cache; uv keeps no wheel hash in dist-info, so they cannot be "
                     "traced to a hash")
    if not_uv:
        notes.append("installed by another tool: " + ", ".join(not_uv[:5]))
    if mismatched:
        return CheckResult(name="wheel-hashes", status=FAIL,
                           reason="; ".join(mismatched[:3]), notes=tuple(notes),
                           details=details)
    if not verified and not built:
        return CheckResult(name="wheel-hashes", status=SKIP,
                           reason="no locked wheel is in the artifact cache or uv's "
                           "cache to compare RECORD with", notes=tuple(notes),
                           details=details)
    return CheckResult(name="wheel-hashes", status=PASS,
                       reason=f"{len(verified)} distributions match the RECORD of the "
                       f"wheel with the locked sha256{_built_text(built)}",
                       notes=tuple(notes), details=details)


def _built_text(built: list[str]) -> str:
    if not built:
        return ""
    more = ", ..." if len(built) > 3 else ""
    return (f", {len(built)} built from their locked sdist "
            f"({', '.join(built[:3])}{more})")


def _check_sdist(name: str, sdist: PackageSdist, *, built: list[str],
                 mismatched: list[str], uncached: list[str]) -> None:
    """A distribution uv built from the locked sdist: no wheel to compare RECORD
    with, so the sdist it was built from must be the locked bytes."""
    sha256 = wheel_sha256(sdist)
    path = _artifact_path(sha256) if sha256 else None
    if path is None or sha256 is None:
        uncached.append(name)
    elif file_digest(path) != sha256:
        mismatched.append(f"{name}: the cached {sdist.filename} does not hash to "
                          f"the locked sha256 {sha256}")
    else:
        built.append(name)


_CONFLICT = re.compile(
    r"The package `(?P<pkg>[^`]+)` requires `(?P<req>[^`]+)`, but "
    r"(?:`(?P<ver>[^`]+)` is installed|it's not installed)"
)


def parse_uv_pip_check(text: str) -> tuple[list[dict[str, str | None]], list[str]]:
    """uv's report lines -> (conflicts, lines it does not recognise)."""
    conflicts: list[dict[str, str | None]] = []
    other: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        match = _CONFLICT.search(line)
        if match:
            conflicts.append({"package": match["pkg"], "requirement": match["req"],
                              "installed": match["ver"]})
        elif line and not line.startswith(("Using Python", "Checked ", "Found ",
                                           "All installed", "warning:")):
            other.append(line)
    return conflicts, other


def _explained(conflict: dict[str, str | None], lock: Lock) -> str | None:
    """The override that makes this reported conflict intended, as a note."""
    try:
        req = Requirement(str(conflict["requirement"]))
    except InvalidRequirement:
        return None
    installed = conflict["installed"]
    for override in lock.overrides:
        if canonicalize_name(override.name) != canonicalize_name(req.name):
            continue
        if installed is None:
            continue
        if override.specifier.contains(installed, prereleases=True):
            return (f"{conflict['package']} asks for {req}, {req.name} {installed} is "
                    f"installed as the lock's override {override} intends")
    return None


def check_uv_pip_check(lock: Lock | None, python: Path, *,
                       uv: str | None = None, timeout: float = 120.0) -> CheckResult:
    uv = uv or runner.find_uv()  # a dependency: never a reason to skip the check
    proc = subprocess.run([uv, "pip", "check", "--python", str(python)],
                          capture_output=True, text=True, timeout=timeout, check=False)
    conflicts, other = parse_uv_pip_check(proc.stdout + "\n" + proc.stderr)
    if proc.returncode != 0 and not conflicts:
        return CheckResult(name="uv-pip-check", status=FAIL,
                           reason=f"uv pip check exited {proc.returncode}: "
                           + (other[-1] if other else "no output"))
    notes, unexplained = [], []
    for conflict in conflicts:
        note = _explained(conflict, lock) if lock is not None else None
        if note:
            notes.append(note)
        else:
            what = conflict["installed"] or "nothing"
            unexplained.append(f"{conflict['package']} requires "
                               f"{conflict['requirement']}, {what} installed")
    details = {"conflicts": conflicts}
    if unexplained:
        return CheckResult(name="uv-pip-check", status=FAIL,
                           reason=f"{len(unexplained)} unexplained: "
                           + "; ".join(unexplained[:3]), notes=tuple(notes),
                           details=details)
    reason = ("no conflicts" if not conflicts else
              f"{len(conflicts)} reported conflicts, each intended by an override")
    return CheckResult(name="uv-pip-check", status=PASS, reason=reason,
                       notes=tuple(notes), details=details)
