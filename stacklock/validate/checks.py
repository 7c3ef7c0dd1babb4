"""Named checks of an installed venv against its lock: each a pass/fail/skip with a
one-line reason, so a failing validate says which layer is wrong.

What uv really records (checked with uv 0.13): ``INSTALLER`` ("uv"), ``RECORD`` (a
sha256 per installed file) and, for direct URLs only, ``direct_url.json`` with an
empty ``archive_info``. No wheel hash survives an install, so the wheel-hash check
hashes the installed files against a ``RECORD``: the one inside the locked wheel
where the artifact cache holds it by its sha256, else the one uv wrote at install
(uv checked the wheel against the locked sha256 then; see check_wheel_hashes).
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock import runner
from stacklock._fs import cache_dir, file_digest
from stacklock.bounded import open_regular, shorten
from stacklock.errors import RecordError
from stacklock.lock import wheel_sha256
from stacklock.record import digest_of_sha256, load_record, wheel_record
from stacklock.store import ArtifactStore
from stacklock.uvoutput import capture, lines_of

if TYPE_CHECKING:
    from packaging.pylock import PackageSdist

    from stacklock.lock import Lock, LockedPackage

__all__ = [
    "FAIL",
    "MEASURED",
    "PASS",
    "SKIP",
    "CheckResult",
    "check_distributions",
    "check_patches",
    "check_uv_pip_check",
    "check_wheel_hashes",
    "needs_driver",
    "parse_uv_pip_check",
]

PASS, FAIL, SKIP = "pass", "fail", "skip"
# a number reported with no threshold to judge it: never a pass, never a failure
MEASURED = "measured"
STATUSES = (PASS, FAIL, SKIP, MEASURED)
HASH_WORKERS = 8  # files hashed at once by the wheel-hashes check
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
    """``a`` installed is ``b`` locked; any version where the lock gives none
    (a PEP 751 vcs or directory entry, pinned by commit or path)."""
    try:
        return b is None or Version(a) == b
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


def _wheel_record(wheel: Path) -> dict[str, str]:
    """The RECORD inside a ``.whl`` (its own, as the wheel was built), less the
    ``*.data`` files an installer moves elsewhere and RECORD itself."""
    with zipfile.ZipFile(wheel) as zf:
        _, record = wheel_record(zf, str(wheel))
    return {path: digest for path, digest in record.hashed.items()
            if ".data/" not in path and not path.endswith(".dist-info/RECORD")}


def _installed_record(dist_info: Path) -> dict[str, str] | None:
    """The RECORD the installer wrote (PEP 376/627: one hash per installed file);
    None when there is none."""
    record = load_record(dist_info)
    if record is None:
        return None
    return {path: digest for path, digest in record.hashed.items()
            if not path.endswith(".dist-info/RECORD")}


def _file_matches(path: Path, expected: str) -> bool:
    """Whether the file hashes to RECORD's ``algorithm=urlsafe-base64`` digest."""
    algorithm, _, digest = expected.partition("=")
    if algorithm not in hashlib.algorithms_guaranteed:
        return False
    try:  # a regular file only: a FIFO or a device would never end
        with open(path, "rb", opener=open_regular) as fh:
            found = hashlib.file_digest(fh, algorithm).digest()
    except OSError:  # gone, not readable, or not a regular file
        return False
    return base64.urlsafe_b64encode(found).rstrip(b"=").decode() == digest


def _differing(root: Path, expected: dict[str, str],
               pool: ThreadPoolExecutor) -> list[str]:
    """The paths (relative to ``root``, the folder holding the dist-info) whose
    file does not hash to ``expected``; hashed on ``pool`` (hashlib lets go of
    the GIL: the files of a GPU stack run to gigabytes)."""
    paths = sorted(expected)
    same = pool.map(lambda p: _file_matches(root / p, expected[p]), paths)
    return [p for p, ok in zip(paths, same, strict=True) if not ok]


@dataclass
class _Tally:
    verified: list[str] = field(default_factory=list)     # the locked wheel's RECORD
    intact: list[str] = field(default_factory=list)       # the installed RECORD
    mismatched: list[str] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)   # no RECORD to check with
    not_uv: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return {"verified": self.verified, "intact": self.intact,
                "mismatched": self.mismatched, "no_record": self.unrecorded,
                "other_installer": self.not_uv, "built_from_source": self.built}


def _declared(pkg: LockedPackage) -> dict[str, str]:
    """The RECORD digests the lock's patches give the files they change (the
    last patch of a file wins): exactly these are accepted for them."""
    out: dict[str, str] = {}
    for patch in pkg.tool.patches:
        out.update({f.path: digest_of_sha256(f.sha256) for f in patch.files})
    return out


def _check_wheel(name: str, pkg: Any, dist_info: Path, tally: _Tally,
                 pool: ThreadPoolExecutor) -> None:
    """One installed wheel: its files against the RECORD of the locked wheel when
    the artifact store holds it (traced to the locked sha256), else against the
    RECORD written when it was installed (unchanged since)."""
    stored = [(w.filename, p) for w in pkg.wheels
              if (h := wheel_sha256(w)) and (p := _artifact_path(h)) is not None]
    declared = _declared(pkg)
    results = [(filename, _differing(dist_info.parent,
                                     {**_wheel_record(path), **declared}, pool))
               for filename, path in stored]
    if any(not diff for _, diff in results):
        tally.verified.append(name)
        return
    if results:
        filename, diff = results[0]
        tally.mismatched.append(f"{name}: {len(diff)} files differ from {filename} "
                                f"(first: {diff[0]})")
        return
    record = _installed_record(dist_info)
    if not record:
        tally.unrecorded.append(name)
        return
    diff = _differing(dist_info.parent, {**record, **declared}, pool)
    if diff:
        tally.mismatched.append(f"{name}: {len(diff)} files differ from the RECORD "
                                f"written at install (first: {diff[0]})")
    else:
        tally.intact.append(name)


def check_wheel_hashes(lock: Lock, dists: dict[str, Any]) -> CheckResult:
    """Every installed file is the one its wheel holds, by the sha256 in RECORD.

    No wheel hash survives an install, and uv keeps the sha256 it checked only in
    its own cache's private format, so a distribution is traced to the locked
    sha256 where stacklock's artifact store holds that wheel: each installed file
    hashes to the wheel's own RECORD. Otherwise each file is hashed against the
    RECORD the installer wrote (PEP 376/627): the files are as installed, and uv
    checked the wheel against the locked sha256 when it installed it
    (``--require-hashes``; INSTALLER names uv, other installers are noted). A
    distribution built from a locked sdist is named, and the sdist in the
    artifact store is checked against the locked sha256 instead."""
    installed = _installed(dists)
    tally = _Tally()
    uncached: list[str] = []
    with ThreadPoolExecutor(max_workers=HASH_WORKERS) as pool:
        for name, pkg in sorted(lock.by_name.items()):
            dist = installed.get(name)
            if dist is None or not dist.get("dist_info"):
                continue
            if not _same_version(dist["version"], pkg.version):
                continue  # the distributions check reports it
            if dist.get("installer") not in (None, "uv"):
                tally.not_uv.append(f"{name} ({dist['installer']})")
            if pkg.sdist is not None:
                _check_sdist(name, pkg.sdist, built=tally.built,
                             mismatched=tally.mismatched, uncached=uncached)
                continue
            try:
                _check_wheel(name, pkg, Path(dist["dist_info"]), tally, pool)
            except RecordError as exc:  # nothing to check its files against
                tally.mismatched.append(f"{name}: {exc.message}")
    details = {**tally.to_dict(), "sdist_not_in_artifact_cache": uncached}
    notes = []
    if tally.built:
        notes.append("built from source on install (sdist sha256 checked): "
                     + ", ".join(tally.built))
    if tally.intact:
        notes.append(f"{len(tally.intact)} wheels not in the artifact cache: their "
                     "files match the RECORD written at install (uv checked each "
                     "wheel's sha256 then)")
    if tally.unrecorded or uncached:
        gone = tally.unrecorded + uncached
        notes.append(f"{len(gone)} cannot be checked (no RECORD, or the sdist is "
                     f"not in the artifact cache): {', '.join(gone[:5])}")
    if tally.not_uv:
        notes.append("installed by another tool: " + ", ".join(tally.not_uv[:5]))
    if tally.mismatched:
        return CheckResult(name="wheel-hashes", status=FAIL,
                           reason="; ".join(tally.mismatched[:3]), notes=tuple(notes),
                           details=details)
    if not (tally.verified or tally.intact or tally.built):
        return CheckResult(name="wheel-hashes", status=SKIP,
                           reason="no installed distribution of the lock could "
                           "be checked against a RECORD", notes=tuple(notes),
                           details=details)
    return CheckResult(name="wheel-hashes", status=PASS,
                       reason=_passed_text(tally), notes=tuple(notes), details=details)


def _passed_text(tally: _Tally) -> str:
    parts = []
    if tally.verified:
        parts.append(f"{len(tally.verified)} distributions match the RECORD of the "
                     "wheel with the locked sha256")
    if tally.intact:
        parts.append(f"{len(tally.intact)} match the RECORD written at install")
    return ", ".join(parts) + _built_text(tally.built)


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


def check_patches(lock: Lock, dists: dict[str, Any]) -> CheckResult | None:
    """The lock's patches, what each is for, and whether every file it changes
    holds the sha256 the lock records; None for a lock without patches."""
    patched = [p for p in lock.packages if p.tool.patches]
    if not patched:
        return None
    installed = _installed(dists)
    applied, wrong = [], []
    for pkg in patched:
        dist = installed.get(pkg.name)
        for patch in pkg.tool.patches:
            applied.append({"package": pkg.name, "version": str(pkg.version),
                            "patch": patch.path, "sha256": patch.sha256,
                            "reason": patch.reason,
                            "files": [f.path for f in patch.files]})
        if dist is None or not dist.get("dist_info"):
            wrong.append(f"{pkg.name} is not installed")
            continue
        site = Path(dist["dist_info"]).parent
        for path, digest in sorted(_declared(pkg).items()):
            if not _file_matches(site / path, digest):
                wrong.append(f"{pkg.name}: {path} is not as patched")
    text = "; ".join(f"{a['package']} {a['version']}: {a['patch']} ({a['reason']})"
                     for a in applied)
    details = {"applied": applied, "not_as_patched": wrong}
    if wrong:
        return CheckResult(name="patches", status=FAIL, reason="; ".join(wrong[:3])
                           + f" (declared: {text})", details=details)
    return CheckResult(name="patches", status=PASS, reason=f"{len(applied)} applied: "
                       + text, details=details)


_CONFLICT = re.compile(
    r"The package `(?P<pkg>[^`]+)` requires `(?P<req>[^`]+)`, but "
    r"(?:`(?P<ver>[^`]+)` is installed|it's not installed)"
)


def parse_uv_pip_check(text: str) -> tuple[list[dict[str, str | None]], list[str]]:
    """uv's report lines -> (conflicts, lines it does not recognise)."""
    conflicts: list[dict[str, str | None]] = []
    other: list[str] = []
    for line in lines_of(text):
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
    # no uv.toml of the working directory or the user's (a broken one failed it)
    said = capture([uv, "pip", "check", "--no-config", "--python", str(python)],
                   timeout=timeout)
    if said.timed_out:
        return CheckResult(name="uv-pip-check", status=FAIL,
                           reason=f"uv pip check did not finish in {timeout:g} s")
    conflicts, other = parse_uv_pip_check(said.stdout + "\n" + said.stderr)
    if said.rc != 0 and not conflicts:
        return CheckResult(name="uv-pip-check", status=FAIL,
                           reason=f"uv pip check exited {said.rc}: "
                           + (shorten(other[-1], 200) if other else "no output"))
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
                           + shorten("; ".join(unexplained[:3]), 600),
                           notes=tuple(notes),
                           details=details)
    reason = ("no conflicts" if not conflicts else
              f"{len(conflicts)} reported conflicts, each intended by an override")
    return CheckResult(name="uv-pip-check", status=PASS, reason=reason,
                       notes=tuple(notes), details=details)
