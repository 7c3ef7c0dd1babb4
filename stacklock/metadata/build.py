"""Metadata of an sdist the standard way: PEP 517 in an isolated build environment.

When PKG-INFO cannot be trusted (see :mod:`stacklock.metadata.pkg_info`), the sdist is
unpacked, a fresh venv is made by ``uv venv`` from the target's Python (found as uv
finds one, ``uv python find``; none is an error, never the host's Python instead,
since a backend answers for the interpreter it runs on), its
``build-system.requires``, the profile's ``build-requires``, the locked versions of
its ``match-runtime`` projects and ``get_requires_for_build_wheel`` are installed by
``uv pip install``, and pypa/build's :class:`build.ProjectBuilder`
calls the backend's ``prepare_metadata_for_build_wheel`` (or, for a backend
without it, builds the wheel and reads its METADATA). Every command's output goes
to one log file.

A build that needs what the target has and this machine lacks (torch at build
time, a CUDA toolkit, a GPU) is recognised in that log and reported as one line
quoting the log's own line (``No module named 'torch'``) and what to do instead.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
import threading
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock.bounded import shorten
from stacklock.errors import MetadataError, SdistBuildError
from stacklock.metadata.archive_errors import BROKEN_ARCHIVE
from stacklock.metadata.removals import find_removal
from stacklock.uvoutput import last_line, lines_of, read_log

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from stacklock.profile import Profile
    from stacklock.runner import Runner

__all__ = [
    "BuildPython",
    "BuildSetup",
    "diagnose_build_log",
    "find_build_python",
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
    from (the target's version such as "3.12", found by ``uv python find``, or
    a path), ``build_requires`` (project -> extra requirements installed into
    its build environment: the profile's ``[requirements] build-requires`` and
    the pins its ``match-runtime`` gives), ``index_args`` (uv's index options
    for those installs), ``log_dir`` for the logs, and the ``runner`` of
    subprocesses (None: the real one)."""

    uv: str
    python: str
    log_dir: Path
    build_requires: Mapping[str, tuple[str, ...]]
    index_args: tuple[str, ...] = ()
    runner: Runner | None = None


@dataclass(frozen=True, kw_only=True)
class BuildPython:
    """The interpreter metadata builds run on: its ``path`` and what it says
    it is (``CPython 3.12.1``), the words the lock records."""

    path: str
    describe: str


_ASK = ("import platform; print(platform.python_implementation(), "
        "platform.python_version())")


def find_build_python(setup: BuildSetup) -> BuildPython:
    """The target's interpreter, found the way uv finds one (``uv python find``),
    and asked what it is: a shim that answers with another version, or fails,
    is refused in one line with its own words, never replaced by the host's."""
    runner = setup.runner or _real_runner()
    request = setup.python
    env = {"UV_PYTHON_DOWNLOADS": "never"}
    argv = [setup.uv, "python", "find", "--no-project", request]
    shown = f"`uv python find --no-project {request}`"
    if "/" in request:
        path = request
    else:
        rc, out = runner.capture(argv, env=env)
        found = last_line(out)
        if rc != 0 or found is None:
            raise _no_python(request, f"{shown} found none"
                             + _why_not(setup, runner, argv, env))
        path = found
    rc, out = runner.capture([path, "-c", _ASK])
    words = out.split()
    if rc != 0 or len(words) != 2:
        raise _no_python(request, f"{shorten(path)} does not run (exit {rc})")
    implementation, version = words
    if "/" not in request and not _same_release(version, request):
        raise _no_python(request, f"{shown} gave {shorten(path)}, which is "
                         f"{shorten(implementation, 40)} {shorten(version, 40)}")
    return BuildPython(path=path, describe=f"{implementation} {version}")


def _same_release(version: str, request: str) -> bool:
    """Whether ``version`` (3.12.1) is the ``request``ed release (3.12)."""
    return (version + ".").startswith(request + ".")


def _why_not(setup: BuildSetup, runner: Runner, argv: Sequence[str],
             env: Mapping[str, str]) -> str:
    """uv's own reason (a pyenv shim's "command not found"): on stderr, so
    asked again with the output to a log."""
    log = setup.log_dir / "python-find.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")
    runner.run(list(argv), log=log, env=env)
    lines = lines_of(read_log(log))
    found = [ln for ln in lines if "not found" in ln or ln.startswith("error:")]
    return f" ({shorten(found[-1], 160)})" if found else ""


def _no_python(request: str, why: str) -> MetadataError:
    return MetadataError(
        f"no Python {request} to build sdists' metadata with: {why}",
        hint=f"install one (`uv python install {request}`, or `pyenv install "
        f"{request}` with its bin folder first on PATH); stacklock never builds "
        "with another Python, since the metadata would be for that one")


def make_build_setup(profile: Profile, *, log_dir: Path,
                     runtime_pins: Mapping[str, str] | None = None) -> BuildSetup:
    """How a profile's sdists are built for their metadata: uv from stacklock's
    own dependency, the target's Python, the profile's ``build-requires``, and
    for its ``match-runtime`` projects the pins ``runtime_pins`` gives (name ->
    ``torch==2.9.1``; a name without one goes in bare), from its indexes."""
    from stacklock.runner import find_uv

    spec = profile.requirements
    pins = runtime_pins or {}
    extra = {name: [str(r) for r in reqs]
             for name, reqs in spec.build_requires.items()}
    for name, runtime in spec.match_runtime.items():
        extra.setdefault(name, []).extend(pins.get(n, n) for n in runtime)
    return BuildSetup(
        uv=find_uv(), python=profile.target.python, log_dir=log_dir,
        build_requires={name: tuple(reqs) for name, reqs in extra.items()},
        index_args=_index_args(profile))


def _index_args(profile: Profile) -> tuple[str, ...]:
    """uv's index options for build environments: the profile's indexes in its
    order (the last simple one as uv's default, in PyPI's place), find-links
    for flat ones; none declared means PyPI, as for the resolution."""
    from stacklock.urls import strip_credentials

    simple = [strip_credentials(i.url) for i in profile.indexes if i.kind != "flat"]
    args = [a for i in profile.indexes if i.kind == "flat"
            for a in ("--find-links", strip_credentials(i.url))]
    if simple:
        args += [a for url in simple[:-1] for a in ("--index", url)]
        args += ["--default-index", simple[-1]]
    elif profile.indexes:
        args.append("--no-index")
    return tuple(args)


def diagnose_build_log(text: str) -> str | None:
    """What the failed build needed that this machine lacks, or None."""
    return next((what for what, pattern in _NEEDS if pattern.search(text)), None)


def prepare_metadata(
    sdist: Path, *, project: str, filename: str, setup: BuildSetup,
    python: BuildPython,
) -> bytes:
    """The METADATA the wheel built from ``sdist`` will have (PEP 517) when
    built on ``python``."""
    from build import BuildBackendException, BuildException, ProjectBuilder

    runner = setup.runner or _real_runner()
    log = setup.log_dir / f"build-{filename}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")
    with tempfile.TemporaryDirectory(prefix="stacklock-build-") as tmp:
        env = _BuildEnv(Path(tmp) / "env", setup=setup, runner=runner, log=log,
                        python=python.path)
        try:
            source = _unpack(sdist, Path(tmp) / "src")
            env.create()

            def hook_runner(cmd: Sequence[str], cwd: str | None = None,
                            extra_environ: Mapping[str, str] | None = None) -> None:
                env.check(cmd, env=extra_environ, cwd=Path(cwd) if cwd else None)
                _log_hook_warnings(Path(cmd[-1]), log)

            # pypa/build's own warnings (a typo in pyproject.toml) go to the
            # log too; recorded under a lock, builds run in several threads
            with _WARNINGS, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                builder = ProjectBuilder.from_isolated_env(env, source,
                                                           runner=hook_runner)
            with log.open("a", encoding="utf-8") as fh:
                fh.writelines(f"warning: {w.message}\n" for w in caught)
            env.install([*builder.build_system_requires,
                         *setup.build_requires.get(project, ())])
            env.install(sorted(builder.get_requires_for_build("wheel")))
            prepared = Path(builder.metadata_path(Path(tmp) / "out"))
            return (prepared / "METADATA").read_bytes()
        except (BuildBackendException, BuildException, _StepFailed) as exc:
            _log_backend_traceback(log, exc)
            raise _failure(filename, project, log, exc, python) from exc
        except BROKEN_ARCHIVE as exc:  # an sdist that cannot be unpacked
            raise _failure(filename, project, log, exc, python) from exc


_WARNINGS = threading.Lock()  # warnings.catch_warnings is one for the process


def _log_hook_warnings(control: Path, log: Path) -> None:
    """Move the warnings a backend's hook gave (setuptools' "License
    classifiers are deprecated") from the hook's ``output.json`` into the
    build's log. pyproject_hooks runs a hook in a subprocess, which writes
    them there, and raises them again with ``warnings.warn_explicit`` in the
    thread that called it: builds run in the resolver's threads, and a
    ``catch_warnings`` around each (one state for the whole process, restored
    by whichever build ends first) let them through to the user's terminal
    as ``BuildBackendWarning``. Emptied here, before the caller reads the
    file, they are raised nowhere."""
    from stacklock.bounded import Malformed, parse_json

    output = control / "output.json"
    try:
        data = parse_json(output.read_bytes())
    except (OSError, Malformed):
        return  # not a hook's control folder, or nothing written: as it is
    found = data.get("warnings") if isinstance(data, dict) else None
    if not isinstance(found, list) or not found:
        return
    with log.open("a", encoding="utf-8") as fh:
        fh.writelines(f"warning: {w.get('message') if isinstance(w, dict) else w}\n"
                      for w in found)
    data["warnings"] = []
    output.write_text(json.dumps(data), encoding="utf-8")


class _StepFailed(Exception):
    """A command of the build failed; its output is in the log."""


class _BuildEnv:
    """A build venv made by uv (build's ``IsolatedEnv`` protocol)."""

    def __init__(self, path: Path, *, setup: BuildSetup, runner: Runner,
                 log: Path, python: str) -> None:
        self.path = path
        self._python = python
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
        """A venv of the target's Python (:func:`find_build_python`)."""
        self.check([self._setup.uv, "venv", "--quiet", "--python", self._python,
                    str(self.path)])

    def install(self, requirements: Sequence[str]) -> None:
        if requirements:
            self.check([self._setup.uv, "pip", "install", "--quiet", "--python",
                        self.python_executable, *self._setup.index_args,
                        *requirements])

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


def _log_backend_traceback(log: Path, exc: Exception) -> None:
    """A backend that cannot even be imported (pypa/build: "Backend ... is not
    available") leaves its traceback on the exception, not in the log: put it
    there, where the diagnosis and the user look."""
    traceback = getattr(getattr(exc, "exception", None), "traceback", None)
    if isinstance(traceback, str) and traceback.strip():
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"{exc}\n{traceback.rstrip()}\n")


def _failure(filename: str, project: str, log: Path,
             exc: Exception, python: BuildPython) -> SdistBuildError:
    try:  # uv's and the backend's output: its last 16 MiB, decoded one way
        text = read_log(log)
    except OSError:
        text = ""
    removed = find_removal(text, _release(python))
    if removed is not None:
        return SdistBuildError(
            f"{filename} does not build on {python.describe}: its build uses "
            f"{removed.what}, which Python {removed.removed_in} removed from the "
            f"standard library ({removed.line}; log: {log})",
            hint=f"require a newer release of {project} (one that builds on, or "
            f"has a wheel for, Python {_release_text(python)}), or lock for an "
            "older Python with [target] python",
            needs=None, log=log)
    needs = diagnose_build_log(text)
    last = _cause_line(text) or str(exc)
    if needs is not None:
        return SdistBuildError(
            f"{filename}: preparing {project}'s metadata needs {needs}, which "
            f"its build environment lacks ({last}; log: {log})",
            hint=f"serve a prebuilt wheel of {project} for the target (a wheel "
            "index or a flat find-links [[index]]), or build it against the "
            f'locked runtime: [requirements] match-runtime = {{"{project}" = '
            '["torch"]}',
            needs=needs, log=log)
    return SdistBuildError(
        f"{filename}: preparing {project}'s metadata failed ({last}; log: {log})",
        hint=f"read the log; if {project} needs more to build, add it with "
        f'[requirements] build-requires = {{"{project}" = [...]}}, or refuse '
        "sdists with [requirements] no-build = true",
        needs=None, log=log)


def _release(python: BuildPython) -> tuple[int, int]:
    """(3, 12) for "CPython 3.12.1"."""
    from packaging.version import InvalidVersion, Version

    try:
        release = Version(python.describe.split()[-1]).release
    except InvalidVersion:
        return (0, 0)
    return (release[0], release[1] if len(release) > 1 else 0)


def _release_text(python: BuildPython) -> str:
    return ".".join(map(str, _release(python)))


def _cause_line(text: str) -> str | None:
    """The log's line that names the cause: the first one a known need matches
    (``ModuleNotFoundError: No module named 'torch'``), else the last line that
    reads like an error; trimmed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for _what, pattern in _NEEDS:
        hit = next((ln for ln in lines if pattern.search(ln)), None)
        if hit is not None:
            return hit[:200]
    for line in reversed(lines):
        if re.search(r"Error|error:|FAILED|not found", line):
            return line[:200]
    return None
