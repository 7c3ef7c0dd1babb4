"""Metadata of an sdist the standard way: PEP 517 in an isolated build environment.

When PKG-INFO cannot be trusted (see :mod:`stacklock.metadata.pkg_info`), the sdist is
unpacked, a fresh venv is made by ``uv venv`` for the target's Python (when this
machine has it), its ``build-system.requires`` and ``get_requires_for_build_wheel``
are installed by ``uv pip install``, and pypa/build's :class:`build.ProjectBuilder`
calls the backend's ``prepare_metadata_for_build_wheel`` (or, for a backend
without it, builds the wheel and reads its METADATA). Every command's output goes
to one log file.

A build that needs what the target has and this machine lacks (torch at build
time, a CUDA toolkit, a GPU) is recognised in that log and reported as one line
with what to do instead.
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.errors import SdistBuildError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from stacklock.profile import Profile
    from stacklock.runner import Runner

__all__ = [
    "BuildSetup",
    "diagnose_build_log",
    "make_build_setup",
    "prepare_metadata",
]

# What a failed build's log says when it needs something this machine lacks.
_NEEDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("torch at build time",
     re.compile(r"No module named ['\"]?torch\b|import torch\b.*\n.*Error")),
    ("a CUDA toolkit (nvcc, CUDA_HOME)",
     re.compile(r"CUDA_HOME|\bnvcc\b|cuda_runtime(_api)?\.h|CUDA toolkit", re.I)),
    ("a GPU",
     re.compile(r"nvidia-smi|No CUDA GPUs|CUDA is not available|"
                r"torch\.cuda\.is_available\(\)", re.I)),
)


@dataclass(frozen=True, kw_only=True)
class BuildSetup:
    """How builds run: ``uv`` (path), the ``python`` the build venv is made
    from (a path or a version such as "3.12"), ``build_requires`` (project ->
    extra requirements installed into its build environment, the profile's
    ``[requirements] build-requires``),
    ``log_dir`` for the logs, and the ``runner`` of subprocesses (None: the
    real one)."""

    uv: str
    python: str
    log_dir: Path
    build_requires: Mapping[str, tuple[str, ...]]
    runner: Runner | None = None


def make_build_setup(profile: Profile, *, log_dir: Path) -> BuildSetup:
    """How a profile's sdists are built for their metadata: uv from stacklock's
    own dependency, the target's Python, the profile's ``build-requires``."""
    from stacklock.runner import find_uv

    spec = profile.requirements
    return BuildSetup(
        uv=find_uv(), python=profile.target.python, log_dir=log_dir,
        build_requires={name: tuple(str(r) for r in reqs)
                        for name, reqs in spec.build_requires.items()})


def diagnose_build_log(text: str) -> str | None:
    """What the failed build needed that this machine lacks, or None."""
    return next((what for what, pattern in _NEEDS if pattern.search(text)), None)


def prepare_metadata(
    sdist: Path, *, project: str, filename: str, setup: BuildSetup
) -> bytes:
    """The METADATA the wheel built from ``sdist`` will have (PEP 517)."""
    from build import BuildBackendException, BuildException, ProjectBuilder

    runner = setup.runner or _real_runner()
    log = setup.log_dir / f"build-{filename}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")
    with tempfile.TemporaryDirectory(prefix="stacklock-build-") as tmp:
        env = _BuildEnv(Path(tmp) / "env", setup=setup, runner=runner, log=log)
        try:
            source = _unpack(sdist, Path(tmp) / "src")
            env.create()

            def hook_runner(cmd: Sequence[str], cwd: str | None = None,
                            extra_environ: Mapping[str, str] | None = None) -> None:
                env.check(cmd, env=extra_environ, cwd=Path(cwd) if cwd else None)

            # build reports the backend's warnings with warnings.warn; they go
            # to the log, never to the user's terminal.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                builder = ProjectBuilder.from_isolated_env(env, source,
                                                           runner=hook_runner)
                env.install([*builder.build_system_requires,
                             *setup.build_requires.get(project, ())])
                env.install(sorted(builder.get_requires_for_build("wheel")))
                prepared = Path(builder.metadata_path(Path(tmp) / "out"))
            with log.open("a", encoding="utf-8") as fh:
                fh.writelines(f"warning: {w.message}\n" for w in caught)
            return (prepared / "METADATA").read_bytes()
        except (BuildBackendException, BuildException, _StepFailed,
                OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
            raise _failure(filename, project, log, exc) from exc


class _StepFailed(Exception):
    """A command of the build failed; its output is in the log."""


class _BuildEnv:
    """A build venv made by uv (build's ``IsolatedEnv`` protocol)."""

    def __init__(self, path: Path, *, setup: BuildSetup, runner: Runner,
                 log: Path) -> None:
        self.path = path
        self._setup = setup
        self._runner = runner
        self._log = log

    @property
    def python_executable(self) -> str:
        return str(self.path / "bin" / "python")

    def make_extra_environ(self) -> dict[str, str]:
        import os

        return {"PATH": f"{self.path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "PYTHONPATH": "", "VIRTUAL_ENV": str(self.path)}

    def create(self) -> None:
        """A venv of the target's Python where this machine has one (uv's
        discovery), else of the Python stacklock runs on, as uv itself does."""
        argv = [self._setup.uv, "venv", "--quiet", "--python"]
        try:
            self.check([*argv, self._setup.python, str(self.path)])
        except _StepFailed:
            self.check([*argv, sys.executable, str(self.path)])

    def install(self, requirements: Sequence[str]) -> None:
        if requirements:
            self.check([self._setup.uv, "pip", "install", "--quiet", "--python",
                        self.python_executable, *requirements])

    def check(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> None:
        merged = {"UV_PYTHON_DOWNLOADS": "never", **(env or {})}
        rc = self._runner.run(list(argv), log=self._log, env=merged, cwd=cwd)
        if rc != 0:
            raise _StepFailed(f"`{' '.join(argv[:3])} ...` exited {rc}")


def _real_runner() -> Runner:
    from stacklock.runner import SubprocessRunner

    return SubprocessRunner()


def _unpack(sdist: Path, into: Path) -> Path:
    """Unpack the sdist; its one top folder (where pyproject.toml/setup.py is).
    A source tree (a direct reference) is copied, so a build never writes into
    it."""
    if sdist.is_dir():
        shutil.copytree(sdist, into, ignore=shutil.ignore_patterns(".git"))
        return into
    into.mkdir(parents=True)
    if sdist.name.endswith(".zip") or zipfile.is_zipfile(sdist):
        with zipfile.ZipFile(sdist) as archive:
            archive.extractall(into)
    else:
        with tarfile.open(sdist) as archive:
            archive.extractall(into, filter="data")
    tops = [p for p in into.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else into


def _failure(filename: str, project: str, log: Path,
             exc: Exception) -> SdistBuildError:
    text = log.read_text("utf-8", "replace") if log.exists() else ""
    needs = diagnose_build_log(text)
    last = _last_error_line(text) or str(exc)
    if needs is not None:
        return SdistBuildError(
            f"{filename}: preparing {project}'s metadata needs {needs}, which "
            f"this machine lacks ({last}; log: {log})",
            hint=f"serve a prebuilt wheel of {project} for the target (a wheel "
            "index or a flat find-links [[index]]), or name what its build needs: "
            f'[requirements] build-requires = {{"{project}" = ["torch==..."]}}',
            needs=needs, log=log)
    return SdistBuildError(
        f"{filename}: preparing {project}'s metadata failed ({last}; log: {log})",
        hint=f"read the log; if {project} needs more to build, add it with "
        f'[requirements] build-requires = {{"{project}" = [...]}}, or refuse '
        "sdists with [requirements] no-build = true",
        needs=None, log=log)


def _last_error_line(text: str) -> str | None:
    """The last line of the log that reads like an error, trimmed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if re.search(r"Error|error:|FAILED|not found", line):
            return line[:200]
    return None
