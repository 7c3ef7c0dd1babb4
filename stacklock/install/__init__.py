"""``stacklock install``: put a lock on this machine, safely.

Order of work, so that any failure (or a kill) before the last step leaves the
machine as it was: read the lock -> find and ask the interpreter -> plan ->
preflight -> (dry run stops here) -> snapshot the current venv -> fetch and verify
the runfile -> build the new venv generation beside the old one -> run the runfile
into a new prefix -> swap the venv symlink (atomic) -> activation file ->
``/usr/local/cuda`` only if asked -> validate (when available).
"""

from __future__ import annotations

import os
import shutil
import tomllib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stacklock._fs import cache_dir
from stacklock.errors import InstallError, StacklockError
from stacklock.http import make_http_client
from stacklock.install.plan import InstallPlan, make_plan, read_lock
from stacklock.install.preflight import (
    INSTALLER_LOG,
    find_base_python,
    probe_interpreter,
    run_preflight,
    toolkit_installed,
)
from stacklock.install.toolkit import (
    SYSTEM_INSTALLER_LOG,
    fetch_runfile,
    install_toolkit,
    link_cuda,
    pypi_toolkit_home,
    write_activation,
)
from stacklock.install.venv import (
    VenvLayout,
    build_generation,
    current_generation,
    discard_generation,
    locked_state,
    next_generation,
    recover,
    rollback,
    swap_in,
)
from stacklock.runner import Runner, SubprocessRunner, find_uv
from stacklock.store import ArtifactStore

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from stacklock.install.plan import LockInfo

__all__ = [
    "InstallResult",
    "RollbackResult",
    "install_lock",
    "render_install",
    "render_rollback",
    "rollback_install",
]

DEFAULT_CUDA_LINK = Path("/usr/local/cuda")


@dataclass(frozen=True, kw_only=True)
class InstallResult:
    plan: InstallPlan
    dry_run: bool
    replaced_generation: int | None = None
    snapshot: Path | None = None
    logs: dict[str, Path] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    validation: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "plan": self.plan.to_dict(),
            "replaced_generation": self.replaced_generation,
            "snapshot": str(self.snapshot) if self.snapshot else None,
            "logs": {k: str(v) for k, v in sorted(self.logs.items())},
            "notes": list(self.notes),
            "validation": self.validation.to_dict()
            if hasattr(self.validation, "to_dict")
            else None,
        }


@dataclass(frozen=True, kw_only=True)
class RollbackResult:
    venv: Path
    from_generation: int
    to_generation: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "venv": str(self.venv),
            "from_generation": self.from_generation,
            "to_generation": self.to_generation,
        }


def _strict_check(path: Path) -> None:
    """A stacklock lock also goes through lock.load_lock (strict versioning)."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return  # read_lock already reported it
    if "lock-version" not in data.get("tool", {}).get("stacklock", {}):
        return  # a plain PEP 751 lock (uv pip compile), not ours
    try:
        from stacklock.lock import load_lock
    except ImportError:  # pragma: no cover - lock.py not present
        return
    load_lock(path)


def _validator() -> Callable[..., Any] | None:
    """The seam to ``stacklock.validate``: its ``validate_install(lock, venv)``."""
    try:
        from stacklock import validate
    except ImportError:  # pragma: no cover
        return None
    return getattr(validate, "validate_install", None)


def _named(
    on_download: Callable[[str, int, int | None], None] | None, name: str
) -> Callable[[int, int | None], None] | None:
    if on_download is None:
        return None
    return lambda done, total: on_download(name, done, total)


def _prefetch_wheels(
    lock: LockInfo,
    plan: InstallPlan,
    *,
    store: ArtifactStore,
    http: httpx.Client,
    on_download: Callable[[str, int, int | None], None] | None,
) -> InstallPlan:
    """Fetch the plan's wheels into the store; uv then reads them by ``path``."""
    urls = {w.sha256: w.url for p in lock.packages for w in p.wheels if w.url}
    local = dict(plan.local_wheels)
    for item in plan.downloads:
        url = urls.get(item.sha256)
        if item.kind != "wheel" or item.cached or url is None:
            continue
        path, _ = store.fetch(
            http,
            url,
            expected_sha256=item.sha256,
            size=item.size,
            progress=_named(on_download, item.filename),
        )
        local[item.sha256] = str(path)
    return replace(plan, local_wheels=local)


def install_lock(
    lock_path: Path,
    *,
    venv: Path = Path(".venv"),
    python: str | None = None,
    toolkit_prefix: Path | None = None,
    no_toolkit: bool = False,
    dry_run: bool = False,
    allow_no_gpu: bool = False,
    link_cuda_at: Path | None = None,
    validate: bool = True,
    runner: Runner | None = None,
    http: httpx.Client | None = None,
    cache: Path | None = None,
    installer_log: Path = INSTALLER_LOG,
    system_installer_log: Path = SYSTEM_INSTALLER_LOG,
    on_download: Callable[[str, int, int | None], None] | None = None,
    prefetch: bool = True,
) -> InstallResult:
    """Install ``lock_path`` into ``venv`` (and its toolkit); see the module doc.

    ``on_download(filename, done, total)`` reports download progress.
    ``prefetch`` downloads every wheel into the artifact store first (resumable,
    sha256-checked, traceable later by validate) so uv installs from local files;
    without it uv downloads them itself (still hash-checked).
    """
    runner = runner or SubprocessRunner()
    cache = cache or cache_dir()
    venv = Path(os.path.abspath(venv))
    lock = read_lock(Path(lock_path))
    _strict_check(lock.path)
    uv = find_uv()
    python = python or find_base_python(lock.python_request, uv=uv, runner=runner)
    interp = probe_interpreter(python, runner=runner)
    layout = VenvLayout(venv=venv)
    store = ArtifactStore(cache / "artifacts")
    current = current_generation(layout)
    if venv.is_symlink() and current is None:
        raise InstallError(
            f"{venv} is a symlink stacklock did not make",
            hint="remove it or install to another --venv",
        )
    exists = venv.exists()  # a dangling symlink holds nothing to keep
    plain = exists and current is None
    generation = next_generation(layout) + (1 if plain else 0)
    prefix = toolkit_prefix or (
        Path(lock.toolkit.prefix) if lock.toolkit and lock.toolkit.prefix else None
    )
    present = bool(
        prefix and lock.toolkit and toolkit_installed(prefix, lock.toolkit.version)
    )
    cached = {
        w.sha256: hit
        for p in lock.packages
        for w in p.wheels
        if (hit := store.path_for(w.sha256)) is not None
    }
    plan = make_plan(
        lock,
        venv=venv,
        interpreter=interp,
        uv=uv,
        generation=generation,
        replaces=venv.resolve() if exists else None,
        replaced_generation=generation - 1 if plain else current,
        cached=cached,
        toolkit_prefix=toolkit_prefix,
        install_toolkit=not no_toolkit,
        toolkit_present=present,
        link_cuda=link_cuda_at,
        runfile_cached=bool(
            lock.toolkit and lock.toolkit.sha256 and store.has(lock.toolkit.sha256)
        ),
    )
    notes = run_preflight(
        lock,
        plan,
        interp,
        cache=cache,
        allow_no_gpu=allow_no_gpu,
        installer_log=installer_log,
    )
    if present and lock.toolkit is not None:
        notes.append(f"CUDA {lock.toolkit.version} in {prefix}; not reinstalled")
    if dry_run:
        return InstallResult(plan=plan, dry_run=True, notes=tuple(notes))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
    logs: dict[str, Path] = {}

    def log_for(step: str) -> Path:
        return cache / "logs" / f"{stamp}-{step}.log"

    with locked_state(layout):
        notes += recover(layout)
        snapshot = None
        if exists and plan.snapshot_path is not None:
            from stacklock.snapshot import write_snapshot

            snapshot = write_snapshot(venv, plan.snapshot_path)
        own_http = http or make_http_client(timeout=60.0)
        try:
            if prefetch:
                plan = _prefetch_wheels(
                    lock, plan, store=store, http=own_http, on_download=on_download
                )
            runfile = None
            if plan.runfile_command and plan.toolkit is not None:
                runfile = fetch_runfile(
                    plan.toolkit,
                    store=store,
                    http=own_http,
                    progress=_named(on_download, str(plan.toolkit.runfile)),
                )
        finally:
            if http is None:
                own_http.close()
        try:
            build_generation(plan, lock.raw, runner=runner, logs=logs, log_for=log_for)
            if runfile is not None:
                logs["runfile"] = log_for("runfile")
                logs.update(
                    install_toolkit(
                        plan,
                        runfile,
                        runner=runner,
                        log=logs["runfile"],
                        installer_log=installer_log,
                        system_log=system_installer_log,
                    )
                )
        except BaseException:
            discard_generation(layout, plan.generation)
            shutil.rmtree(plan.uv_lock_path.parent, ignore_errors=True)
            raise
        home = plan.toolkit_prefix
        if home is None and plan.toolkit is not None and plan.toolkit.source == "pypi":
            home = pypi_toolkit_home(plan.generation_dir, plan.toolkit.version)
        write_activation(plan.activation_path, venv=venv, prefix=home)
        replaced = swap_in(layout, plan.generation)
        shutil.rmtree(plan.uv_lock_path.parent, ignore_errors=True)
        if plan.link_cuda is not None and plan.toolkit_prefix is not None:
            link_cuda(plan.link_cuda, plan.toolkit_prefix)
    validation = None
    check = _validator() if validate else None
    if check is not None:
        try:
            validation = check(lock.path, venv)
        except StacklockError as exc:  # installed fine; validation could not run
            notes.append(f"validate could not run: {exc}")
    elif validate:
        notes.append("validate skipped: stacklock.validate offers no validate_install")
    return InstallResult(
        plan=plan,
        dry_run=False,
        replaced_generation=replaced,
        snapshot=snapshot,
        logs=logs,
        notes=tuple(notes),
        validation=validation,
    )


def rollback_install(venv: Path = Path(".venv")) -> RollbackResult:
    """``stacklock install --rollback``: the previous generation becomes current."""
    layout = VenvLayout(venv=Path(os.path.abspath(venv)))
    with locked_state(layout):
        recover(layout)
        old, new = rollback(layout)
    return RollbackResult(venv=layout.venv, from_generation=old, to_generation=new)


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def render_install(result: InstallResult) -> str:
    plan = result.plan
    verb = "would install" if result.dry_run else "installed"
    lines = [f"{verb} {plan.lock_path} into {plan.venv} (generation {plan.generation})"]
    if plan.replaces:
        lines.append(f"  replaces {plan.replaces}; snapshot -> {plan.snapshot_path}")
    lines.append(f"  python {plan.python}")
    lines.append(f"downloads ({_size(plan.download_bytes)} not cached):")
    for d in plan.downloads:
        state = "cached" if d.cached else d.url
        lines.append(f"  {d.kind:7} {d.filename}  {_size(d.size)}  {state}")
    lines.append("commands:")
    lines += ["  " + " ".join(c) for c in plan.commands]
    if plan.runfile_command:
        lines.append("  " + " ".join(plan.runfile_command))
    if plan.toolkit_prefix and plan.toolkit:
        lines.append(f"toolkit CUDA {plan.toolkit.version} -> {plan.toolkit_prefix}")
    lines.append(f"activate: source {plan.venv / plan.activation_path.name}")
    if plan.link_cuda:
        lines.append(f"relink {plan.link_cuda} -> {plan.toolkit_prefix}")
    lines += [f"log {k}: {v}" for k, v in sorted(result.logs.items())]
    checks = getattr(result.validation, "checks", None)
    if checks is not None:
        failed = [c.name for c in checks if getattr(c, "status", "") == "fail"]
        verdict = "FAILED: " + ", ".join(failed) if failed else "ok"
        lines.append(f"validate: {verdict} ({len(checks)} checks)")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def render_rollback(result: RollbackResult) -> str:
    return (
        f"{result.venv}: generation {result.from_generation} -> "
        f"{result.to_generation} (run install --rollback again to go further back)"
    )
