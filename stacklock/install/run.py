"""The install itself, step by step as the package doc lists them:
:func:`install_lock`, :func:`rollback_install` and their results."""

from __future__ import annotations

import os
import shutil
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock._fs import cache_dir, check_writable
from stacklock.errors import InstallError, StacklockError
from stacklock.install.decide import decide
from stacklock.install.early import log_namer
from stacklock.install.fetch import fetch_artifacts
from stacklock.install.fetched import Fetched, uv_fetched
from stacklock.install.interpreter import remember_interpreter
from stacklock.install.layout import (
    KEEP_GENERATIONS,
    VenvLayout,
    check_place,
    discard_generation,
    holds_lock,
    locked_state,
    prune,
    recover,
    refuse_running_environment,
    rollback,
    swap_in,
)
from stacklock.install.preflight import INSTALLER_LOG, runfile_notice
from stacklock.install.read import read_installable
from stacklock.install.replay import remember
from stacklock.install.toolkit import (
    SYSTEM_INSTALLER_LOG,
    install_toolkit,
    link_cuda,
    pypi_toolkit_home,
    write_activation,
)
from stacklock.install.venv import build_generation
from stacklock.install.verify import check_generation, out_of_space
from stacklock.lockbytes import read_lock_bytes
from stacklock.runner import Runner, SubprocessRunner, find_uv
from stacklock.store import ArtifactStore
from stacklock.words import counted, plural

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from stacklock.install.early import HeadStart
    from stacklock.install.inputs import Wanted
    from stacklock.install.patching import PackagePatches
    from stacklock.install.plan import InstallPlan
    from stacklock.lock import Lock
    from stacklock.lockarchive import Archive
    from stacklock.validate.report import ValidateResult

__all__ = [
    "DEFAULT_CUDA_LINK",
    "InstallResult",
    "RollbackResult",
    "install_lock",
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
    validation: ValidateResult | None = None
    validate_error: str | None = None  # validation was asked for and could not run
    # the generation that already held exactly this lock: nothing was done
    already_installed: int | None = None
    fetched: Fetched | None = None  # what the install downloaded (None: dry run)

    @property
    def ok(self) -> bool:
        """Installed, and validated where validation was asked for."""
        if self.validate_error is not None:
            return False
        return self.validation is None or self.validation.ok

    def to_dict(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "plan": self.plan.to_dict(),
            "replaced_generation": self.replaced_generation,
            "snapshot": str(self.snapshot) if self.snapshot else None,
            "logs": {k: str(v) for k, v in sorted(self.logs.items())},
            "notes": list(self.notes),
            "validation": self.validation.to_dict() if self.validation else None,
            "validate_error": self.validate_error,
            "already_installed": self.already_installed,
            "fetched": self.fetched.to_dict() if self.fetched else None,
        }


@dataclass(frozen=True, kw_only=True)
class RollbackResult:
    venv: Path
    from_generation: int
    to_generation: int

    def to_dict(self) -> dict[str, object]:
        return {
            "venv": str(self.venv),
            "from_generation": self.from_generation,
            "to_generation": self.to_generation,
        }


def _build(
    lock: Lock | None,
    plan: InstallPlan,
    runfile: Path | None,
    *,
    runner: Runner,
    logs: dict[str, Path],
    log_for: Callable[[str], Path],
    installer_log: Path,
    system_installer_log: Path,
    cuda_link: Path,
    notes: list[str],
    head: HeadStart | None,
    patches: tuple[PackagePatches, ...] = (),
    on_notice: Callable[[str], None] | None = None,
) -> None:
    """The new generation (its packages patched as the lock says) and the
    toolkit; on any failure both are removed. ``on_notice`` is told, as the
    runfile starts, which runfile runs (as root), its sha256 and whose it is."""
    layout = VenvLayout(venv=plan.venv)
    try:
        try:
            build_generation(plan, lock, runner=runner, logs=logs, log_for=log_for,
                             head=head)
        except (StacklockError, OSError) as exc:
            cause = out_of_space(plan.generation_dir)
            if cause is not None:
                raise cause from exc
            raise
        if patches:
            from stacklock.install.patching import apply_to_generation

            notes.extend(apply_to_generation(plan.generation_dir, patches))
        check_generation(plan)  # before anything is swapped in
        if runfile is not None:
            assert plan.toolkit is not None
            if on_notice is not None:
                on_notice(f"running {runfile_notice(plan.toolkit)}")
            logs["runfile"] = log_for("runfile")
            logs.update(
                install_toolkit(
                    plan,
                    runfile,
                    runner=runner,
                    log=logs["runfile"],
                    installer_log=installer_log,
                    system_log=system_installer_log,
                    cuda_link=cuda_link,
                    notes=notes,
                )
            )
    except BaseException:
        discard_generation(layout, plan.generation)
        shutil.rmtree(plan.uv_lock_path.parent, ignore_errors=True)
        raise


def _activate(plan: InstallPlan) -> int | None:
    """Activation file, then the atomic swap; returns the replaced generation."""
    home = plan.toolkit_prefix
    if home is None and plan.toolkit is not None and plan.toolkit.source == "pypi":
        home = pypi_toolkit_home(plan.generation_dir, plan.toolkit.version)
    write_activation(plan.activation_path, venv=plan.venv, prefix=home)
    replaced = swap_in(VenvLayout(venv=plan.venv), plan.generation)
    shutil.rmtree(plan.uv_lock_path.parent, ignore_errors=True)
    if plan.link_cuda is not None and plan.toolkit_prefix is not None:
        link_cuda(plan.link_cuda, plan.toolkit_prefix)
    return replaced


def _installed_already(plan: InstallPlan, layout: VenvLayout) -> int | None:
    """The current generation when installing ``plan`` again would change
    nothing: it was built from a lock of the same bytes with the same python,
    the toolkit needs no install, and its distributions still equal the lock's
    (names and versions: seconds, where hashing every file would take minutes)."""
    from stacklock.bounded import parse_json

    try:
        n = holds_lock(layout, plan.lock_bytes)
        if n is None or plan.runfile_command is not None or plan.link_cuda:
            return None
        record = parse_json((layout.state_dir / f"{n}.ok").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("python") != plan.python:
        return None
    from stacklock.validate.checks import PASS, check_distributions
    from stacklock.validate.run import read_distributions

    try:
        dists = read_distributions(layout.generation_dir(n) / "bin" / "python")
    except StacklockError:
        return None
    lock = _installed_part(read_installable(plan.lock_path, plan.lock_bytes), plan)
    if check_distributions(lock, dists).status != PASS:
        return None
    if any(p.tool.patches for p in lock.packages):
        from stacklock.install.patching import patched_files_hold

        if not patched_files_hold(layout.generation_dir(n), lock):
            return None
    return n


def _validate(lock: Lock, venv: Path, *, toolkit_prefix: Path | None,
              allow_no_gpu: bool, report_dir: Path | None
              ) -> ValidateResult | str:
    from stacklock.validate.run import validate_install  # only a validating run pays

    folder = report_dir or VenvLayout(venv=venv).state_dir / "validate"
    try:
        return validate_install(lock, venv, toolkit_prefix=toolkit_prefix,
                                allow_no_gpu=allow_no_gpu, report_dir=folder)
    except StacklockError as exc:  # installed fine; validation could not run
        return f"validate could not run: {exc}"


def _installed_part(lock: Lock, plan: InstallPlan) -> Lock:
    """The lock as validate should hold the new venv to it: the packages the
    plan installed (a lock another tool wrote also lists other platforms'
    packages, other groups' and other extras')."""
    names = {name for name, _ in plan.packages}
    if all(p.name in names for p in lock.packages):
        return lock
    from dataclasses import replace

    return replace(lock, packages=tuple(p for p in lock.packages if p.name in names))


def _archive_notes(store: ArtifactStore) -> list[str]:
    """One line saying which files came from the archive, and why."""
    if not store.from_archive or store.archive is None:
        return []
    names = ", ".join(f"{name} ({why})" for name, why in store.from_archive)
    return [f"{counted(len(store.from_archive), 'file')} from the archive "
            f"{store.archive.shown}, each checked against its sha256: {names}"]


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
    report_dir: Path | None = None,
    runner: Runner | None = None,
    http: httpx.Client | None = None,
    cache: Path | None = None,
    installer_log: Path = INSTALLER_LOG,
    system_installer_log: Path = SYSTEM_INSTALLER_LOG,
    on_download: Callable[[str, int, int | None], None] | None = None,
    prefetch: bool = False,
    cuda_link: Path = DEFAULT_CUDA_LINK,
    head: HeadStart | None = None,
    wanted: Wanted | None = None,
    reinstall: bool = False,
    archive: Archive | None = None,
    content: bytes | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> InstallResult:
    """Install ``lock_path`` into ``venv`` (and its toolkit); see the module doc.

    A venv whose current generation was installed from these very bytes (and
    still holds them) is left as it is: ``already_installed`` says which one,
    nothing is built or validated. ``reinstall`` builds a new generation anyway.

    ``cuda_link`` (``/usr/local/cuda``) is left as it was by the runfile; only
    ``link_cuda_at`` (``--link-cuda``) moves it, once the install succeeded.

    ``on_download(filename, done, total)`` reports download progress;
    ``on_notice(line)`` is said the moment the runfile starts (which one, its
    sha256, as root), whatever else is shown.
    uv downloads the wheels (in parallel, each checked against the locked sha256
    with ``--require-hashes``) into its own cache, the one copy kept; wheels
    already in the artifact store (a pack) are installed from there.
    ``prefetch`` downloads every wheel into the store first instead.
    ``report_dir`` is where the closing validation writes its report; default
    ``<venv>.stacklock/validate/``, never the working directory.
    ``head`` is uv already building the next generation
    (:mod:`~stacklock.install.early`), started under the venv's install lock:
    install adopts it when the plan runs exactly its commands, else stops it.
    ``wanted``: the extras and dependency groups to install (default: the
    lock's ``default-groups``), and ``--no-build``.
    ``archive``: where a file whose URL is gone is fetched from instead
    (``stacklock archive``); every file then goes through the store first.

    The lock file is read once, first, and checked (a regular file, bounded:
    :func:`~stacklock.lockbytes.read_lock_bytes`); ``content`` is that read when
    the caller made it (the head start did). Everything after (the replay key,
    the plan, uv's copy, the generation's copy, the validation) uses those bytes.
    """
    if content is None:
        content = read_lock_bytes(lock_path)
    if report_dir is not None:  # a bad --report fails now, not after the install
        check_writable(report_dir / "report.json", example="report.json")
    runner = runner or SubprocessRunner()
    cache = cache or cache_dir()
    venv = Path(os.path.abspath(venv))
    refuse_running_environment(VenvLayout(venv=venv))
    if os.path.lexists(venv) and not venv.is_dir():  # never adopt or replace it
        raise InstallError(f"{venv} is a file, not a venv",
                           hint="pass --venv a new path or an existing venv")
    check_place(venv, cache)
    lock_path = Path(lock_path)
    uv = find_uv()
    store = ArtifactStore(cache / "artifacts", archive=archive)
    prefetch = prefetch or archive is not None
    decided = decide(
        lock_path, python or (head.python if head is not None else None),
        content=content, venv=venv, uv=uv, store=store, cache=cache, runner=runner,
        toolkit_prefix=toolkit_prefix, no_toolkit=no_toolkit,
        link_cuda_at=link_cuda_at, allow_no_gpu=allow_no_gpu,
        installer_log=installer_log,
        generation=head.generation if head is not None else None,
        replay=not prefetch, wanted=wanted)
    plan, lock, notes = decided.plan, decided.lock, list(decided.notes)
    if dry_run:
        return InstallResult(plan=plan, dry_run=True, notes=tuple(notes))
    if decided.interp is not None:  # the install goes ahead: remember for next time
        remember_interpreter(decided.interp, cache)
    if lock is not None and decided.key is not None:
        remember(decided.key, plan, lock, cache=cache)
    logs: dict[str, Path] = {}
    layout = VenvLayout(venv=venv)
    with nullcontext() if head is not None else locked_state(layout):
        notes += head.notes if head is not None else recover(layout)
        already = None if head is not None or reinstall else \
            _installed_already(plan, layout)
        if already is not None:
            return InstallResult(plan=plan, dry_run=False, notes=tuple(notes),
                                 already_installed=already)
        snapshot = None
        # what this run writes before the swap goes again if it does not get there
        # (an error, Ctrl-C, SIGTERM): the snapshot unless an earlier run made it
        made = plan.snapshot_path is not None and not plan.snapshot_path.exists()
        try:
            if plan.snapshot_path is not None:
                from stacklock.snapshot import write_snapshot

                warnings: list[str] = []
                snapshot = write_snapshot(venv, plan.snapshot_path,
                                          warnings=warnings)
                notes += [f"snapshot: {line}" for line in warnings]
            runfile = None
            if lock is not None:  # a replayed plan has nothing only stacklock fetches
                plan, runfile = fetch_artifacts(lock, plan, store=store, http=http,
                                                on_download=on_download,
                                                prefetch=prefetch)
                notes += _archive_notes(store)
            _build(lock, plan, runfile, runner=runner, logs=logs,
                   log_for=head.log_for if head else log_namer(cache),
                   installer_log=installer_log,
                   system_installer_log=system_installer_log,
                   cuda_link=link_cuda_at or cuda_link, notes=notes, head=head,
                   patches=decided.patches, on_notice=on_notice)
        except BaseException:
            if made and plan.snapshot_path is not None:
                plan.snapshot_path.unlink(missing_ok=True)
            raise
        uv_files, uv_bytes = (uv_fetched(logs["uv-pip-sync"], plan)
                              if "uv-pip-sync" in logs else (0, 0))
        fetched = Fetched(uv_files=uv_files, uv_bytes=uv_bytes,
                          stacklock_bytes=store.bytes_fetched)
        replaced = _activate(plan)
        pruned = prune(layout)
        if pruned:
            notes.append(f"removed old {plural(len(pruned), 'generation')} "
                         f"{', '.join(map(str, pruned))} "
                         f"(the newest {KEEP_GENERATIONS} are kept)")
    validation = (_validate(_installed_part(
        lock or read_installable(lock_path, plan.lock_bytes), plan),
                            venv, toolkit_prefix=toolkit_prefix,
                            allow_no_gpu=allow_no_gpu, report_dir=report_dir)
                  if validate else None)
    error = validation if isinstance(validation, str) else None
    if isinstance(validation, str):
        notes.append(validation)
        validation = None
    return InstallResult(plan=plan, dry_run=False, replaced_generation=replaced,
                         snapshot=snapshot, logs=logs, notes=tuple(notes),
                         fetched=fetched,
                         validation=validation, validate_error=error)


def rollback_install(venv: Path = Path(".venv")) -> RollbackResult:
    """``stacklock install --rollback``: the previous generation becomes current."""
    layout = VenvLayout(venv=Path(os.path.abspath(venv)))
    with locked_state(layout):
        recover(layout)
        old, new = rollback(layout)
    return RollbackResult(venv=layout.venv, from_generation=old, to_generation=new)
