"""Install's plan and preflight: replayed when this lock and interpreter were
planned before (:mod:`~stacklock.install.replay`), else decided from the lock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.install.early import find_base_python
from stacklock.install.inputs import Wanted
from stacklock.install.interpreter import probe_interpreter
from stacklock.install.layout import VenvLayout, current_generation, new_generation
from stacklock.install.plan import InstallPlan, Interpreter, assemble, make_plan
from stacklock.install.preflight import (
    check_lock_fits,
    check_places,
    run_preflight,
    toolkit_installed,
)
from stacklock.install.read import python_request, read_installable
from stacklock.install.replay import recall, replay_key

if TYPE_CHECKING:
    from stacklock.install.patching import PackagePatches
    from stacklock.install.selection import Selected
    from stacklock.lock import Lock
    from stacklock.runner import Runner
    from stacklock.store import ArtifactStore

__all__ = ["Decided", "decide"]


def _place(venv: Path, generation: int | None
           ) -> tuple[int, Path | None, int | None]:
    """(the new generation, the environment it replaces, that one's number): a
    plain venv at ``venv`` is adopted as the number before the new one."""
    layout = VenvLayout(venv=venv)
    current = current_generation(layout)
    exists = venv.exists()  # a dangling symlink holds nothing to keep
    if generation is None:
        generation = new_generation(layout)
    plain = exists and current is None
    return (generation, venv.resolve() if exists else None,
            generation - 1 if plain else current)


@dataclass(frozen=True, kw_only=True)
class Decided:
    """A plan that passed its checks, and what deciding it loaded."""

    plan: InstallPlan
    notes: tuple[str, ...] = ()
    lock: Lock | None = None  # None: a replayed plan; the lock is read to validate
    interp: Interpreter | None = None
    key: str | None = None  # where to remember the plan for a replay
    # the lock's patches of the packages the plan installs, their files read
    # and checked against the lock (a replayed plan has none: never remembered)
    patches: tuple[PackagePatches, ...] = ()


def _replayed(key: str, lock_path: Path, content: bytes, python: str, *,
              venv: Path, uv: str,
              store: ArtifactStore, cache: Path, generation: int | None,
              installer_log: Path) -> Decided | None:
    """The remembered plan of this lock and interpreter, checked against this
    machine (:mod:`~stacklock.install.replay`); None when there is none."""
    choices = recall(key, cache=cache, store=store)
    if choices is None:
        return None
    generation, replaces, replaced = _place(venv, generation)
    plan = assemble(choices, lock_path=lock_path, lock_bytes=content, venv=venv,
                    python=python, uv=uv,
                    generation=generation, replaces=replaces,
                    replaced_generation=replaced, local_wheels={})
    check_places(plan, cache=cache, installer_log=installer_log)
    return Decided(plan=plan)


def decide(
    lock_path: Path,
    python: str | None,
    *,
    content: bytes,
    venv: Path,
    uv: str,
    store: ArtifactStore,
    cache: Path,
    runner: Runner,
    toolkit_prefix: Path | None,
    no_toolkit: bool,
    link_cuda_at: Path | None,
    allow_no_gpu: bool,
    installer_log: Path,
    generation: int | None,
    replay: bool,
    wanted: Wanted | None = None,
) -> Decided:
    """Plan and preflight of the lock at ``lock_path`` whose bytes are
    ``content`` (read once, checked): replayed when this lock and interpreter were
    planned before (``replay``), else from the lock (parse, probe, the lock-wide checks,
    ``Pylock.select()`` with what is ``wanted``, plan, every other check). A
    plan with ``--extra``/``--group``/``--no-build`` is never replayed."""
    wanted = wanted or Wanted()
    replay = replay and wanted == Wanted()
    key = None
    if replay and python is not None:
        key = replay_key(content, python)
        done = key and _replayed(key, lock_path, content, python, venv=venv, uv=uv,
                                 store=store, cache=cache, generation=generation,
                                 installer_log=installer_log)
        if done:
            return done
    lock = read_installable(lock_path, content)
    if python is None:
        python = find_base_python(python_request(lock), uv=uv, runner=runner)
        key = replay_key(content, python) if replay else None
    interp = probe_interpreter(python, runner=runner, cache=cache)
    check_lock_fits(lock, interp)
    # packaging.pylock (~20 ms of imports) only when the plan is not replayed
    from stacklock.install.selection import (
        refuse_builds,
        refuse_unhashed,
        select_packages,
        selection_notes,
    )

    selected = select_packages(lock, interp, extras=wanted.extras,
                               groups=wanted.groups)
    refuse_unhashed(selected, lock)
    if wanted.no_build:
        refuse_builds(selected, lock.path)
    plan, present = _plan(lock, interp, content, venv=venv, uv=uv, store=store,
                          toolkit_prefix=toolkit_prefix, no_toolkit=no_toolkit,
                          link_cuda_at=link_cuda_at, generation=generation,
                          selected=selected, wanted=wanted)
    patches: tuple[PackagePatches, ...] = ()
    if any(p.tool.patches for p in lock.packages):  # before anything changes
        from stacklock.install.patching import read_patches

        patches = read_patches(lock, [name for name, _ in plan.packages],
                               store=store)
    notes = run_preflight(lock, plan, interp, cache=cache, allow_no_gpu=allow_no_gpu,
                          installer_log=installer_log, selected=selected,
                          unknown_runfile=wanted.unknown_runfile)
    notes += selection_notes(selected, interp)
    if present is not None and lock.cuda is not None:
        notes.append(f"CUDA {lock.cuda.version} in {present}; not reinstalled")
    return Decided(plan=plan, notes=tuple(notes), lock=lock, interp=interp, key=key,
                   patches=patches)


def _plan(
    lock: Lock,
    interp: Interpreter,
    content: bytes,
    *,
    venv: Path,
    uv: str,
    store: ArtifactStore,
    toolkit_prefix: Path | None,
    no_toolkit: bool,
    link_cuda_at: Path | None,
    generation: int | None,
    selected: list[Selected],
    wanted: Wanted,
) -> tuple[InstallPlan, Path | None]:
    """The plan, and the prefix that already holds the lock's toolkit, if any;
    ``generation`` is the number a head start already builds."""
    generation, replaces, replaced = _place(venv, generation)
    toolkit = lock.cuda
    prefix = toolkit_prefix or (
        Path(toolkit.prefix) if toolkit and toolkit.prefix else None
    )
    present = bool(prefix and toolkit and toolkit_installed(prefix, toolkit.version))
    from stacklock.lock import wheel_sha256

    cached = {
        sha: hit
        for p in lock.packages
        for w in p.all_files
        if (sha := wheel_sha256(w)) and (hit := store.path_for(sha)) is not None
    }
    plan = make_plan(
        lock,
        lock_bytes=content,
        venv=venv,
        interpreter=interp,
        uv=uv,
        generation=generation,
        replaces=replaces,
        replaced_generation=replaced,
        cached=cached,
        toolkit_prefix=toolkit_prefix,
        install_toolkit=not no_toolkit,
        toolkit_present=present,
        link_cuda=link_cuda_at,
        runfile_cached=bool(toolkit and toolkit.sha256 and store.has(toolkit.sha256)),
        selected=selected,
        selection=wanted.uv_options(),
    )
    return plan, prefix if present else None
