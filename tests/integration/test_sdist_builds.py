"""Metadata builds for real: the target's interpreter found by uv (a failing
pyenv shim refused in one line, never the host's Python instead), and sdists
that import their runtime at build time, as flash-attn 2.8.3 imports torch.

The sdists here are made by the test: flash-attn's with its real PKG-INFO
(tests/data/sdist/flash_attn-2.8.3.PKG-INFO, ``Dynamic: Requires-Dist``) and an
in-tree backend that imports torch and names it as a dependency, as its setup.py
does; "demo" does the same with pip as its runtime, because pip's real wheel
(the one ensurepip bundles) can be served offline. Everything comes from a
PEP 503 index on a loopback server, the profile's only index; install's uv
builds demo with the pip the lock installs (uv's ``match-runtime``).
"""

from __future__ import annotations

import ensurepip
import functools
import hashlib
import io
import os
import stat
import subprocess
import sys
import tarfile
import tomllib
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stacklock.errors import MetadataError, SdistBuildError
from stacklock.install.run import install_lock
from stacklock.metadata.build import BuildSetup, find_build_python
from stacklock.profile import load_profile
from stacklock.resolve.lockfile import make_lock
from stacklock.resolve.resolution import resolve_profile
from stacklock.runner import find_uv
from tests.helpers.loopback import loopback

if TYPE_CHECKING:
    from collections.abc import Iterator

DATA = Path(__file__).resolve().parents[1] / "data" / "sdist"
HOST = f"{sys.version_info[0]}.{sys.version_info[1]}"
BUNDLED = Path(ensurepip.__file__).parent / "_bundled"

# An in-tree PEP 517 backend whose hooks import RUNTIME and require the version
# they found, as flash-attn's setup.py imports torch; its wheel says which.
BACKEND = '''\
import base64, hashlib, importlib, os, zipfile

INFO = "{dist}-{version}.dist-info"

def get_requires_for_build_wheel(config_settings=None):
    return []

def _metadata():
    runtime = importlib.import_module("{runtime}")
    return ("Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n"
            "Requires-Dist: {runtime}==" + runtime.__version__ + "\\n")

def prepare_metadata_for_build_wheel(directory, config_settings=None):
    os.makedirs(os.path.join(directory, INFO))
    with open(os.path.join(directory, INFO, "METADATA"), "w") as fh:
        fh.write(_metadata())
    return INFO

def build_wheel(directory, config_settings=None, metadata_directory=None):
    runtime = importlib.import_module("{runtime}")
    name = "{dist}-{version}-py3-none-any.whl"
    files = {{"{dist}.py": "BUILT_WITH = " + repr(runtime.__version__) + "\\n",
             INFO + "/METADATA": _metadata(),
             INFO + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\n"
                              "Root-Is-Purelib: true\\nTag: py3-none-any\\n"}}
    rows = []
    with zipfile.ZipFile(os.path.join(directory, name), "w") as whl:
        for member, text in files.items():
            whl.writestr(member, text)
            digest = base64.urlsafe_b64encode(
                hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            rows.append(f"{{member}},sha256={{digest}},{{len(text.encode())}}")
        whl.writestr(INFO + "/RECORD", "\\n".join([*rows, INFO + "/RECORD,,"]))
    return name
'''
PYPROJECT = b'''[build-system]
requires = []
build-backend = "_backend"
backend-path = ["."]
'''


def _sdist(folder: Path, name: str, version: str, runtime: str,
           pkg_info: bytes) -> Path:
    dist = name.replace("-", "_")
    top = f"{dist}-{version}"
    backend = BACKEND.format(runtime=runtime, dist=dist, name=name,
                             version=version).encode()
    return _tar(folder, top, {"PKG-INFO": pkg_info, "pyproject.toml": PYPROJECT,
                              "_backend.py": backend})


def _tar(folder: Path, top: str, files: dict[str, bytes]) -> Path:
    """``folder/top.tar.gz`` holding ``files`` under ``top/``."""
    path = folder / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, body in files.items():
            info = tarfile.TarInfo(f"{top}/{member}")
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return path


def _legacy_sdist(folder: Path) -> Path:
    """An sdist whose in-tree backend imports ``formatter`` (removed in Python
    3.10), as numpy 1.23.5's pinned setuptools imports ``distutils``: the
    backend cannot even be imported."""
    top = "legacy-1.0"
    files = {"PKG-INFO": b"Metadata-Version: 2.2\nName: legacy\nVersion: 1.0\n"
                         b"Dynamic: Requires-Dist\n",
             "pyproject.toml": PYPROJECT,
             "_backend.py": b"import formatter  # gone since Python 3.10\n"}
    return _tar(folder, top, files)


def _pip_wheel() -> Path:
    return next(BUNDLED.glob("pip-*.whl"))


@pytest.fixture
def uv_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """uv with its own cache, that finds the Python running the tests (its
    folder first on PATH) and no managed one."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "no-managed"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    base = Path(_host_python()).parent
    monkeypatch.setenv("PATH", f"{base}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _host_python() -> str:
    return str(Path(getattr(sys, "_base_executable", sys.executable)).resolve())


def _setup(folder: Path, python: str) -> BuildSetup:
    return BuildSetup(uv=find_uv(), python=python, log_dir=folder / "logs",
                      build_requires={})


def test_the_target_python_is_found_and_named(uv_offline: Path) -> None:
    found = find_build_python(_setup(uv_offline, HOST))
    assert found.describe.startswith(f"CPython {HOST}.")
    assert found.describe == f"CPython {sys.version.split()[0]}"


def test_a_failing_shim_is_refused_never_replaced_by_the_host(
    uv_offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyenv's shim for a version it has not activated exits 127 with
    "command not found"; uv then finds no such Python, and neither does
    stacklock. The version is one the tests do not run on (uv would find the
    test run's own venv)."""
    version = "3.12" if sys.version_info[:2] != (3, 12) else "3.13"
    shims = uv_offline / "shims"
    shims.mkdir()
    shim = shims / f"python{version}"
    shim.write_text(f"#!/bin/sh\necho 'pyenv: python{version}: command not found' >&2\n"
                    "exit 127\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(MetadataError) as info:
        find_build_python(_setup(uv_offline, version))
    message = str(info.value)
    assert message.startswith(f"no Python {version} to build sdists' metadata with: "
                              f"`uv python find --no-project {version}` found none")
    assert f"(pyenv: python{version}: command not found)" in message
    assert "\n" not in message
    assert f"uv python install {version}" in (info.value.hint or "")


@pytest.fixture
def served(uv_offline: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 index on a loopback server: pip's real wheel, a demo sdist
    that imports pip at build time, and flash-attn's that imports torch."""
    folder = uv_offline / "simple"
    wheel = _pip_wheel()
    demo_info = (b"Metadata-Version: 2.2\nName: demo\nVersion: 1.0\n"
                 b"Dynamic: Requires-Dist\n")
    files = {"pip": wheel.read_bytes(),
             "demo": _sdist(uv_offline, "demo", "1.0", "pip", demo_info),
             "flash-attn": _sdist(uv_offline, "flash-attn", "2.8.3", "torch",
                                  (DATA / "flash_attn-2.8.3.PKG-INFO").read_bytes()),
             "legacy": _legacy_sdist(uv_offline)}
    for project, body in files.items():
        name = wheel.name if project == "pip" else Path(str(body)).name
        data = body if isinstance(body, bytes) else Path(body).read_bytes()
        (folder / project).mkdir(parents=True)
        (folder / project / name).write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        (folder / project / "index.html").write_text(
            f'<html><body><a href="{name}#sha256={sha}">{name}</a></body></html>')
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with loopback(handler) as url:
        yield url + "/", folder


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _profile(folder: Path, url: str, packages: list[str], extra: str = "") -> Path:
    path = folder / "demo.toml"
    path.write_text(
        f'[target]\npython = "{HOST}"\nplatform = "linux_x86_64"\n'
        f'manylinux = "2_28"\n[[index]]\nname = "links"\nurl = "{url}"\n'
        f'[requirements]\npackages = {packages!r}\n{extra}'
        .replace("'", '"'))
    return path


def test_match_runtime_builds_against_the_locked_runtime(
    served: tuple[str, Path], uv_offline: Path
) -> None:
    """demo's metadata depends on the pip its build imports: with match-runtime
    its build gets the pip this lock holds (found by a second pass, since the
    profile does not pin it), and the lock says so."""
    url, _folder = served
    version = _pip_wheel().name.split("-")[1]
    profile = load_profile(str(_profile(
        uv_offline, url, ["demo", "pip>=20"],
        'match-runtime = {"demo" = ["pip"]}\n')))
    result = resolve_profile(profile, cache_dir=uv_offline / "cache")
    pins = result.pins()
    assert pins == {"demo": "1.0", "pip": version}
    demo = next(p for p in result.packages if p.name == "demo")
    assert f"pip=={version}" in demo.requires_dist
    assert demo.metadata == (f"PEP 517 build on CPython {sys.version.split()[0]} "
                             f"with pip=={version}")
    lock = make_lock(result)
    tool = next(p for p in lock.packages if p.entry.name == "demo").tool
    assert tool.metadata == demo.metadata


def test_without_match_runtime_the_build_log_names_the_cause(
    served: tuple[str, Path], uv_offline: Path
) -> None:
    url, _folder = served
    profile = load_profile(str(_profile(uv_offline, url, ["demo", "pip"])))
    with pytest.raises(SdistBuildError) as info:
        resolve_profile(profile, cache_dir=uv_offline / "cache")
    message = str(info.value)
    assert message.startswith("demo-1.0.tar.gz: preparing demo's metadata failed (")
    assert "No module named 'pip'" in message and "\n" not in message


def test_flash_attn_without_torch_quotes_the_log(
    served: tuple[str, Path], uv_offline: Path
) -> None:
    """flash-attn's real PKG-INFO says Dynamic: Requires-Dist; its build imports
    torch, which the build environment lacks: the error quotes that line."""
    url, _folder = served
    profile = load_profile(str(_profile(uv_offline, url, ["flash-attn==2.8.3"])))
    with pytest.raises(SdistBuildError) as info:
        resolve_profile(profile, cache_dir=uv_offline / "cache")
    message = str(info.value)
    assert info.value.needs == "torch at build time"
    assert ("preparing flash-attn's metadata needs torch at build time, which its "
            "build environment lacks (ModuleNotFoundError: No module named 'torch'"
            ) in message
    assert "match-runtime" in (info.value.hint or "")
    log = info.value.log.read_text()
    assert "uv venv" in log and "command not found" not in log


def test_a_release_that_does_not_build_on_the_target_python_says_so(
    served: tuple[str, Path], uv_offline: Path
) -> None:
    """pypa/build says only "Backend '_backend' is not available"; the cause is
    in the traceback it carried, which the log now holds and the error quotes,
    saying the release does not build on this Python at all."""
    url, _folder = served
    profile = load_profile(str(_profile(uv_offline, url, ["legacy"])))
    with pytest.raises(SdistBuildError) as info:
        resolve_profile(profile, cache_dir=uv_offline / "cache")
    message = str(info.value)
    assert message.startswith(
        f"legacy-1.0.tar.gz does not build on CPython {sys.version.split()[0]}: "
        "its build uses formatter, which Python 3.10 removed from the standard "
        "library (ModuleNotFoundError: No module named 'formatter'; log: ")
    assert "not available" not in message and "\n" not in message
    assert info.value.needs is None
    assert f"newer release of legacy (one that builds on, or has a wheel for, " \
        f"Python {HOST})" in (info.value.hint or "")
    log = info.value.log.read_text()
    assert "Backend '_backend' is not available." in log
    assert "No module named 'formatter'" in log


def test_a_match_runtime_lock_installs_built_against_its_runtime(
    served: tuple[str, Path], uv_offline: Path
) -> None:
    """The exact pin in the profile is the runtime of the build (one pass); the
    lock says so, and install's uv builds demo with the pip it installs."""
    url, _folder = served
    version = _pip_wheel().name.split("-")[1]
    profile = load_profile(str(_profile(
        uv_offline, url, ["demo", f"pip=={version}"],
        'match-runtime = {"demo" = ["pip"]}\n')))
    result = resolve_profile(profile, cache_dir=uv_offline / "cache")
    lock_path = uv_offline / "pylock.demo.toml"
    from stacklock.lock.write import render_lock

    lock_path.write_text(render_lock(make_lock(result)))
    data = tomllib.loads(lock_path.read_text())
    demo = next(p for p in data["packages"] if p["name"] == "demo")
    assert demo["tool"]["stacklock"]["metadata"].endswith(f"with pip=={version}")
    assert demo["tool"]["stacklock"]["match-runtime"] == ["pip"]
    assert demo["sdist"]["name"] == "demo-1.0.tar.gz"

    venv = uv_offline / "env"
    result = install_lock(lock_path, venv=venv, python=_host_python(),
                          cache=uv_offline / "cache", validate=False)
    sync = next(c for c in result.plan.commands if "sync" in c)
    assert "--config-file" in sync
    built = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import demo; print(demo.BUILT_WITH)"],
                           capture_output=True, text=True, check=True)
    assert built.stdout.strip() == version


# A backend that warns while preparing its metadata, as setuptools does
# ("License classifiers are deprecated"); two of them hand over through files so
# that the first build ends while the second one's hook still runs, as two
# metadata builds in the resolver's threads do.
WARNING_BACKEND = '''\
import os, time, warnings

def _wait(path):
    for _ in range(600):
        if os.path.exists(path):
            return
        time.sleep(0.05)

def get_requires_for_build_wheel(config_settings=None):
    return []

def prepare_metadata_for_build_wheel(directory, config_settings=None):
    {before}
    warnings.warn("{name}: License classifiers are deprecated.")
    {after}
    info = os.path.join(directory, "{name}-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n")
    return "{name}-1.0.dist-info"
'''


def _warning_sdist(folder: Path, name: str, before: str, after: str) -> Path:
    top = f"{name}-1.0"
    files = {"PKG-INFO": f"Metadata-Version: 2.2\nName: {name}\nVersion: 1.0\n"
                         "Dynamic: Requires-Dist\n".encode(),
             "pyproject.toml": PYPROJECT,
             "_backend.py": WARNING_BACKEND.format(name=name, before=before,
                                                   after=after).encode()}
    return _tar(folder, top, files)


def test_a_backends_warnings_stay_in_its_build_log(uv_offline: Path) -> None:
    """Two real metadata builds at once (``stacklock resolve`` as a user runs
    it), each backend warning as setuptools does: the first build ends while
    the second one's hook still runs. Each warning is in its own build's log
    and none on stderr (the second one's reached the terminal as a
    BuildBackendWarning, and the first one's log took the other's)."""
    hand = uv_offline / "handover"
    hand.mkdir()
    first = _warning_sdist(
        uv_offline, "warna", before=f"_wait({str(hand / 'b-in')!r})",
        after=f"open({str(hand / 'a-done')!r}, 'w').close()")
    second = _warning_sdist(
        uv_offline, "warnb",
        before=f"open({str(hand / 'b-in')!r}, 'w').close(); "
        f"_wait({str(hand / 'a-done')!r}); time.sleep(2)", after="")
    folder = uv_offline / "simple"
    for project, path in (("warna", first), ("warnb", second)):
        (folder / project).mkdir(parents=True)
        data = path.read_bytes()
        (folder / project / path.name).write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        (folder / project / "index.html").write_text(
            f'<html><body><a href="{path.name}#sha256={sha}">{path.name}</a>'
            "</body></html>")
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with loopback(handler) as url:
        profile = _profile(uv_offline, url + "/", ["warna", "warnb"])
        done = subprocess.run(
            [sys.executable, "-m", "stacklock.cli", "resolve", str(profile), "-o",
             str(uv_offline / "pylock.toml"), "--no-check"],
            capture_output=True, text=True, check=False,
            env={**os.environ, "STACKLOCK_CACHE_DIR": str(uv_offline / "cache")})
    assert done.returncode == 0, done.stderr
    assert (hand / "a-done").exists()  # the builds overlapped as arranged
    assert "License classifiers" not in done.stderr
    assert "BuildBackendWarning" not in done.stderr
    logs = uv_offline / "cache" / "logs"
    for own, other in (("warna", "warnb"), ("warnb", "warna")):
        log = (logs / f"build-{own}-1.0.tar.gz.log").read_text()
        assert f"warning: {own}: License classifiers are deprecated." in log
        assert other not in log
