"""Checks that run before install changes anything; each failure is one line.

The interpreter's own answers (:mod:`~stacklock.install.interpreter`) decide
which wheels fit. Disk estimates use fixed factors (documented on the constants):
they only need to catch "obviously not enough", not predict to the byte.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from stacklock.bounded import parse_json, shorten
from stacklock.errors import CudaError, PreflightError
from stacklock.words import plural

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from stacklock.cuda.catalog import Catalog
    from stacklock.install.inputs import Interpreter
    from stacklock.install.plan import InstallPlan
    from stacklock.install.selection import Selected
    from stacklock.lock import CudaEntry, Lock

__all__ = [
    "INSTALLER_LOG",
    "Problem",
    "check_lock_fits",
    "check_places",
    "run_preflight",
    "runfile_notice",
    "toolkit_installed",
]

# The runfile's installer writes here when not root (the path is compiled into
# cuda-installer; --tmpdir does not move it). A copy left by another user makes
# the next non-root run fail or crash, so install moves its own aside and refuses
# to start when someone else's is in the way.
INSTALLER_LOG = Path("/tmp/cuda-installer.log")
WHEEL_SPACE_FACTOR = 3  # wheel in uv's cache + unpacked site-packages (~2x)
RUNFILE_SPACE_FACTOR = 3  # runfile in the store + extracted in tmpdir + prefix

@dataclass(frozen=True, kw_only=True)
class Problem:
    check: str
    message: str
    hint: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "message": self.message, "hint": self.hint}

    def __str__(self) -> str:
        return f"{self.check}: {self.message} (try: {self.hint})"


def toolkit_installed(prefix: Path, version: str) -> bool:
    """The prefix already holds this toolkit (its version.json says so)."""
    try:
        data = parse_json((prefix / "version.json").read_bytes())
    except (OSError, ValueError):
        return False
    return str(data.get("cuda", {}).get("version", "")) == version


def _toolkit_place(prefix: Path, venv: Path) -> list[Problem]:
    """A runfile toolkit's prefix: a folder of its own (the runfile writes bin/,
    lib64/, include/ straight into it), never the root or a top-level system
    folder, never inside the venv or its generations (replaced and pruned)."""
    real = Path(os.path.realpath(prefix))
    why = None
    if not prefix.is_absolute():
        why = "is not an absolute path"
    elif len(real.parts) < 3:
        why = (f"is {real}, a top-level folder of the system: the runfile writes "
               "bin/, lib64/ and include/ into it")
    else:
        state = venv.parent / f"{venv.name}.stacklock"
        for place in (venv, Path(os.path.realpath(venv)), state):
            if real == place or place in real.parents:
                why = (f"is inside {place}, the venv's own folders, which each "
                       "install replaces and prunes")
                break
    if why is None:
        return []
    return [Problem(check="toolkit", message=f"the toolkit prefix {prefix} {why}",
                    hint="a versioned folder of its own, e.g. "
                    "--toolkit-prefix /opt/cuda-13.0")]


def _writable_base(path: Path) -> Path:
    """The nearest existing ancestor: what must let us create ``path``."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _python(interp: Interpreter) -> Version | None:
    try:
        return Version(interp.marker_env.get("python_full_version",
                                             interp.version).split("+")[0])
    except InvalidVersion:
        return None


def check_lock_fits(lock: Lock, interp: Interpreter) -> None:
    """PEP 751's two lock-wide checks, before any package marker is evaluated
    (a marker may name ``dependency_groups``): one line each."""
    problems = []
    version = _python(interp)
    if lock.requires_python and version and version not in lock.requires_python:
        wanted = shorten(str(lock.requires_python))  # a lock may hold 20,000 clauses
        problems.append(Problem(
            check="python",
            message=f"{interp.path} is {interp.version}; the lock requires-python "
            f"{wanted}",
            hint=f"pass --python with a python {wanted}" if wanted == str(
                lock.requires_python) else f"pass --python with a python the "
            f"lock's requires-python allows (see {lock.path})"))
    env = dict(interp.marker_env)
    if lock.environments and not any(m.evaluate(env) for m in lock.environments):
        count = len(lock.environments)
        listed = shorten("; ".join(str(m) for m in lock.environments))
        problems.append(Problem(
            check="target",
            message=f"python {interp.version} on {interp.machine} is none of the "
            f"lock's {count:,} {plural(count, 'environment')} ({listed})",
            hint="install with --python matching the lock, or re-resolve for here"))
    if problems:
        raise PreflightError(problems)


def _check_target(lock: Lock, interp: Interpreter) -> list[Problem]:
    """The platform and glibc a stacklock lock was resolved for. Python and
    the lock's environments were checked first (:func:`check_lock_fits`);
    which wheel fits is
    ``Pylock.select()``'s (:mod:`~stacklock.install.selection`)."""
    from stacklock.target import PLATFORMS

    out: list[Problem] = []
    target = lock.target
    platform = target.platform if target is not None else ""
    if platform and platform in PLATFORMS and PLATFORMS[platform][0] != interp.machine:
        out.append(
            Problem(
                check="platform",
                message=f"the lock is for {platform}, this machine is {interp.machine}",
                hint="resolve a lock for this platform",
            )
        )
    floor = target.manylinux if target is not None else ""
    if floor and interp.glibc is not None:
        need = (2, int(floor.split("_")[1]))
        if interp.glibc < need:
            out.append(
                Problem(
                    check="glibc",
                    message=f"glibc {interp.glibc[0]}.{interp.glibc[1]} is older than "
                    f"the lock's manylinux_{floor} floor",
                    hint="use a newer OS or re-resolve with an older target.manylinux",
                )
            )
    return out


def _foreign_cuda(lock: Lock, selected: Sequence[Selected], notes: list[str]
                  ) -> dict[str, str]:
    """A lock another tool wrote: the CUDA its selected wheels target, inferred
    (and said) from what it holds; {} for a CPU lock."""
    if lock.stack is not None or lock.snapshot is not None or not any(
            "+cu" in str(s.package.version) or s.package.name.startswith("nvidia-")
            for s in selected):
        return {}  # the CUDA catalog and driver code are not loaded
    from stacklock.cuda.driver import describe_inferred, infer_cuda

    inferred = infer_cuda([s.package for s in selected])
    if inferred:
        notes.append(describe_inferred(inferred))
    return {name: target.cuda for name, target in inferred.items()}


def _known(inferred: Mapping[str, str], catalog: Catalog) -> dict[str, str]:
    """An inferred CUDA the catalog does not list (a library whose own version
    runs past the newest toolkit the catalog knows) checked as its major."""
    out = {}
    for name, cuda in inferred.items():
        try:
            catalog.get(cuda, series=True)
        except CudaError:
            cuda = cuda.split(".")[0]
        out[name] = cuda
    return out


def _check_driver(lock: Lock, allow_no_gpu: bool, notes: list[str],
                  selected: Sequence[Selected] = ()) -> list[Problem]:
    """The driver runs the lock's toolkit and the CUDA its wheels target (as
    recorded by stacklock, or inferred for a lock another tool wrote)."""
    inferred = _foreign_cuda(lock, selected, notes)
    if (lock.cuda is None and not inferred
            and all(p.cuda is None for p in lock.packages)):
        return []  # a CPU lock: the CUDA catalog and driver code are not loaded
    from stacklock.cuda.catalog import load_catalog
    from stacklock.cuda.driver import check_driver, lock_cuda, read_driver

    toolkit, wheels = lock_cuda(lock)
    wheels = {**_known(inferred, load_catalog()), **wheels}
    try:
        driver = read_driver()
    except CudaError as exc:
        if allow_no_gpu:
            notes.append(f"no driver check: {exc.message} (--allow-no-gpu)")
            return []
        return [
            Problem(
                check="driver",
                message=exc.message,
                hint="install on a GPU machine, or pass --allow-no-gpu "
                "to install anyway (e.g. to build an image)",
            )
        ]
    try:
        report = check_driver(load_catalog(), driver, toolkit=toolkit, wheels=wheels)
    except CudaError as exc:
        return [Problem(check="driver", message=exc.message, hint=exc.hint or "")]
    return [
        Problem(
            check="driver",
            message=f"{c.subject}: {c.verdict}: {c.reason}",
            hint="upgrade the driver, or lock an older CUDA",
        )
        for c in report.checks
        if not c.ok
    ]


def _check_space(plan: InstallPlan, cache: Path) -> list[Problem]:
    needs: dict[Path, int] = {}
    wheels = sum(d.size or 0 for d in plan.downloads if d.kind == "wheel")
    base = _writable_base(plan.venv.parent)
    needs[base] = needs.get(base, 0) + wheels * WHEEL_SPACE_FACTOR
    for d in plan.downloads:
        if d.kind == "runfile" and d.size and plan.toolkit_prefix is not None:
            store = _writable_base(cache)
            needs[store] = needs.get(store, 0) + (0 if d.cached else d.size)
            prefix = _writable_base(plan.toolkit_prefix)
            needs[prefix] = needs.get(prefix, 0) + d.size * (RUNFILE_SPACE_FACTOR - 1)
    by_device: dict[int, tuple[Path, int]] = {}
    for path, size in needs.items():
        dev = path.stat().st_dev
        prev = by_device.get(dev, (path, 0))
        by_device[dev] = (prev[0], prev[1] + size)
    out = []
    for path, size in by_device.values():
        free = shutil.disk_usage(path).free
        if free < size:
            out.append(
                Problem(
                    check="disk",
                    message=f"{path}: {free / 1e9:.2f} GB free, about "
                    f"{size / 1e9:.2f} GB needed for downloads and install",
                    hint="free space or choose another --venv/--toolkit-prefix",
                )
            )
    return out


def _check_access(
    plan: InstallPlan, cache: Path, link_cuda: Path | None
) -> list[Problem]:
    places = [plan.venv.parent, cache]
    if plan.runfile_command and plan.toolkit_prefix is not None:
        places.append(plan.toolkit_prefix)
    if plan.link_cuda is not None and link_cuda is not None:
        places.append(link_cuda.parent)
    out = []
    for place in places:
        base = _writable_base(place)
        if not os.access(base, os.W_OK | os.X_OK):
            out.append(
                Problem(
                    check="access",
                    message=f"cannot write {base} (needed for {place})",
                    hint="run as a user who may write there, or choose another path",
                )
            )
    return out


def _check_runfile(plan: InstallPlan, allowed: bool, notes: list[str]
                   ) -> list[Problem]:
    """A lock is code: the runfile it names runs (as root, where stacklock runs as
    root). Its sha256 must be the one the shipped catalog records for that CUDA
    release and platform (what ``stacklock resolve`` locks), unless the user said
    ``--allow-unknown-runfile``; a note says which runfile runs as root."""
    kit = plan.toolkit
    if not plan.runfile_command or kit is None:
        return []
    known, found = _catalog_runfile(kit)
    if not known and not allowed:
        return [Problem(
            check="runfile",
            message=f"{kit.runfile or 'the runfile'}: sha256 {kit.sha256} is not a "
            f"runfile stacklock knows ({found}); a lock is code, and this would run "
            "it" + (" as root" if _root() else ""),
            hint="check where the lock came from; --allow-unknown-runfile runs "
            "it all the same")]
    if _root() or not known:
        notes.append(f"runs {runfile_notice(kit)}")
    return []


def _catalog_runfile(kit: CudaEntry) -> tuple[bool, str]:
    """Whether ``kit``'s runfile is the one the shipped catalog records for its
    CUDA release and platform, and the words for what the catalog says."""
    from stacklock.cuda.catalog import load_catalog

    release = load_catalog().find(kit.version)
    known = release.runfile(kit.platform or "linux-x86_64") if release else None
    if known is not None and known.sha256 and known.sha256 == kit.sha256:
        return True, f"the catalog's for CUDA {kit.version}"
    return False, (f"the catalog's is {known.sha256}" if known and known.sha256 else
                   f"the catalog has no runfile sha256 for CUDA {kit.version}")


def runfile_notice(kit: CudaEntry) -> str:
    """What is said of a runfile before it runs (the plan's note, and the line
    install prints as it starts it): its name, sha256, whether it runs as root
    and whether it is the catalog's (else it runs only because
    ``--allow-unknown-runfile`` said so: preflight refused it otherwise)."""
    known, found = _catalog_runfile(kit)
    whose = found if known else (f"NOT the catalog's ({found}), allowed by "
                                 "--allow-unknown-runfile")
    root = " as root" if _root() else ""
    return f"{kit.runfile or 'the runfile'}{root}: sha256 {kit.sha256}, {whose}"


def _root() -> bool:
    return os.geteuid() == 0


def _check_toolkit(plan: InstallPlan, installer_log: Path) -> list[Problem]:
    out = []
    prefix = plan.toolkit_prefix
    version = plan.toolkit.version if plan.toolkit else "?"
    if plan.runfile_command and prefix is not None:
        out += _toolkit_place(prefix, plan.venv)
    if plan.runfile_command and prefix is not None and prefix.exists():
        if any(prefix.iterdir()):
            out.append(
                Problem(
                    check="toolkit",
                    message=f"{prefix} exists and does not hold CUDA {version}",
                    hint="pass --toolkit-prefix with a new versioned folder",
                )
            )
    if plan.runfile_command and installer_log.exists():
        mine = installer_log.stat().st_uid == os.getuid()
        if not mine and not os.access(installer_log, os.W_OK):
            out.append(
                Problem(
                    check="installer-log",
                    message=f"{installer_log} belongs to uid "
                    f"{installer_log.stat().st_uid}; the runfile fails on another "
                    "user's log",
                    hint=f"have its owner or root remove it: sudo rm {installer_log}",
                )
            )
    if plan.link_cuda is not None and plan.link_cuda.exists():
        if not plan.link_cuda.is_symlink():
            out.append(
                Problem(
                    check="link-cuda",
                    message=f"{plan.link_cuda} is a real directory, not a symlink",
                    hint="leave out --link-cuda; use the activation file instead",
                )
            )
    return out


def run_preflight(
    lock: Lock,
    plan: InstallPlan,
    interp: Interpreter,
    *,
    cache: Path,
    allow_no_gpu: bool,
    installer_log: Path = INSTALLER_LOG,
    selected: Sequence[Selected] = (),
    unknown_runfile: bool = False,
) -> list[str]:
    """Raise :class:`PreflightError` listing every problem; return notes.
    ``selected``: what installs, whose CUDA a foreign lock's driver check
    infers. ``unknown_runfile``: a runfile the catalog does not know may run."""
    notes: list[str] = []
    problems = _check_target(lock, interp)
    problems += _check_driver(lock, allow_no_gpu, notes, selected)
    problems += _check_runfile(plan, unknown_runfile, notes)
    problems += _place_problems(plan, cache=cache, installer_log=installer_log)
    if problems:
        raise PreflightError(problems)
    return notes


def _place_problems(plan: InstallPlan, *, cache: Path, installer_log: Path
                    ) -> list[Problem]:
    return (_check_space(plan, cache) + _check_access(plan, cache, plan.link_cuda)
            + _check_toolkit(plan, installer_log))


def check_places(plan: InstallPlan, *, cache: Path,
                 installer_log: Path = INSTALLER_LOG) -> None:
    """The checks that read this machine's disks, not the lock: space, access,
    the toolkit prefix. All a replayed plan needs (its target and driver checks
    passed on the same lock and interpreter, and it has no CUDA to check)."""
    problems = _place_problems(plan, cache=cache, installer_log=installer_log)
    if problems:
        raise PreflightError(problems)

