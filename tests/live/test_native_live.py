"""Live: every verdict of the native check confirmed by a real load in a real venv.

The oracle is the dynamic loader itself: a venv built by uv from the lock of torch
2.11.0 (PyPI's CUDA 13 build), into which the extension wheel under test is put
(``uv pip install --target``, first on ``PYTHONPATH``) and imported or dlopen'd.
Worth the gigabytes: torch 2.11.0 and its CUDA 13 libraries are 3 GB, and only a
real torch can say whether an extension built for another one loads; every other
test of the checker reads facts recorded from these same wheels.

Cost is paid once: the uv cache, the stacklock cache (wheel reads by sha256) and
the venv live under ``$STACKLOCK_LIVE_CACHE`` (default ``~/.cache/stacklock-live``),
the venv keyed by the lock's sha256 and shared by every test here. Cold, the
module downloads about 3.5 GB for the venv and reads 8 GB of wheels for the two
committed locks; warm, it reads nothing and takes about a minute.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.errors import NativeCheckError
from stacklock.native.lockcheck import check_lock_file
from stacklock.resolve.locking import lock_profile
from stacklock.runner import find_uv
from tests.helpers.native_facts import NATIVE
from tests.helpers.uv import python312

pytestmark = pytest.mark.live

LIVE = Path(os.environ.get("STACKLOCK_LIVE_CACHE",
                           Path.home() / ".cache" / "stacklock-live"))
PROFILES = NATIVE / "profiles"
REPO = Path(__file__).resolve().parents[2]


def _uv() -> str:
    return find_uv()


def _env() -> dict[str, str]:
    return {**os.environ, "UV_CACHE_DIR": str(LIVE / "uv"),
            "UV_PYTHON_DOWNLOADS": "never"}


@pytest.fixture(scope="session", autouse=True)
def live_cache(tmp_path_factory):
    """The stacklock cache of this module: persistent, so wheels are read once."""
    patch = pytest.MonkeyPatch()
    patch.setenv("STACKLOCK_CACHE_DIR", str(LIVE / "stacklock"))
    yield LIVE / "stacklock"
    patch.undo()


def _resolve(profile: str, out: Path, *, check: bool = True):
    return lock_profile(str(PROFILES / f"{profile}.toml"), output=out, check=check,
                        cache_dir=LIVE / "stacklock")


@pytest.fixture(scope="session")
def torch_venv(tmp_path_factory):
    """(python, resolve result) of torch 2.11.0 + torchaudio 2.11.0, installed by
    uv from the lock stacklock wrote (which had to pass the check to be written)."""
    lock = tmp_path_factory.mktemp("torch211") / "pylock.torch211.toml"
    result = _resolve("torch211-torchaudio211", lock)
    key = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    venv = LIVE / "venvs" / f"torch211-{key}"
    python = venv / "bin" / "python"
    if not (venv / ".complete").is_file():
        shutil.rmtree(venv, ignore_errors=True)
        base = python312(tmp_path_factory.mktemp("py312"))
        subprocess.run([_uv(), "venv", "--python", base, str(venv)],
                       check=True, env=_env(), capture_output=True)
        subprocess.run([_uv(), "pip", "install", "--python", str(python), "-r",
                        str(lock)], check=True, env=_env(), capture_output=True)
        (venv / ".complete").write_text(key)
    return python, result


def _wheel_of(lock: Path, package: str) -> dict:
    data = tomllib.loads(lock.read_text("utf-8"))
    entry = next(p for p in data["packages"] if p["name"] == package)
    return entry["wheels"][0]


def _overlay(tmp_path: Path, python: Path, lock: Path, package: str) -> Path:
    """The locked wheel of ``package`` alone (hash-checked) in a folder for
    PYTHONPATH, where it shadows what the venv has."""
    wheel = _wheel_of(lock, package)
    req = tmp_path / "requirements.txt"
    req.write_text(f"{package} @ {wheel['url']} "
                   f"--hash=sha256:{wheel['hashes']['sha256']}\n")
    target = tmp_path / "overlay"
    subprocess.run([_uv(), "pip", "install", "--python", str(python), "--no-deps",
                    "--require-hashes", "--target", str(target), "-r", str(req)],
                   check=True, env=_env(), capture_output=True)
    return target


def _run(python: Path, code: str, overlay: Path | None = None):
    env = {**os.environ, "PYTHONPATH": str(overlay) if overlay else ""}
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          env=env, timeout=600, check=False)


def _load_all(package_dir: Path) -> str:
    """Code that imports torch, then dlopens every shared object under the folder."""
    return ("import ctypes, pathlib, torch\n"
            f"for p in sorted(pathlib.Path({str(package_dir)!r}).rglob('*.so*')):\n"
            "    ctypes.CDLL(str(p))\n"
            "print('loaded')\n")


def test_torchaudio_2_11_on_torch_2_11_passes_and_loads(torch_venv):
    python, result = torch_venv
    assert result.native is not None and result.native.ok
    assert result.native.findings == () and result.native.allowed == ()
    site = next((python.parent.parent / "lib").glob("python3.12/site-packages"))
    done = _run(python, "import torchaudio\n" + _load_all(site / "torchaudio"))
    assert done.returncode == 0, done.stderr
    assert "loaded" in done.stdout


def test_torchaudio_2_9_1_forced_onto_torch_2_11_is_refused_and_does_not_import(
        torch_venv, tmp_path, capsys):
    python, _ = torch_venv
    out = tmp_path / "pylock.refused.toml"
    code = main(["resolve", str(PROFILES / "torch211-torchaudio291.toml"), "-o",
                 str(out)])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists()
    assert "torchaudio 2.9.1: torchaudio/lib/libtorchaudio.so needs libcudart.so.12" \
        in err
    # the oracle: the same wheels, installed and imported
    unchecked = tmp_path / "pylock.unchecked.toml"
    _resolve("torch211-torchaudio291", unchecked, check=False)
    overlay = _overlay(tmp_path, python, unchecked, "torchaudio")
    done = _run(python, "import torchaudio", overlay)
    assert done.returncode != 0
    assert "libcudart.so.12: cannot open shared object file" in done.stderr


@pytest.mark.parametrize(("profile", "extension"), [
    # built for torch 2.12: a C++ symbol of torch::Library that 2.11 lacks
    ("torch211-torchvision027", "torchvision/_C.so"),
    # built for torch 2.14 on torch's stable C ABI: a C function 2.11 lacks
    ("torch211-torchvision029", "torchvision/_C_stable.so"),
])
def test_torchvision_for_a_newer_torch_is_refused_and_misses_that_symbol(
        torch_venv, tmp_path, profile, extension):
    python, _ = torch_venv
    with pytest.raises(NativeCheckError) as caught:
        _resolve(profile, tmp_path / "pylock.refused.toml")
    findings = caught.value.findings
    assert extension in {f.object for f in findings}
    assert {f.kind for f in findings} == {"symbol"}
    missing = {f.missing for f in findings if f.object == extension}
    unchecked = tmp_path / "pylock.unchecked.toml"
    _resolve(profile, unchecked, check=False)
    overlay = _overlay(tmp_path, python, unchecked, "torchvision")
    done = _run(python, "import torch\n"
                f"torch.ops.load_library({str(overlay / extension)!r})", overlay)
    assert done.returncode != 0 and "undefined symbol: " in done.stderr
    symbol = done.stderr.split("undefined symbol: ", 1)[1].split()[0]
    assert symbol in missing


@pytest.mark.parametrize("name",
                         ["pypi-cu130", "pypi-cu130-sm120", "blackwell-cu128"])
def test_committed_locks_pass_the_check(name, capsys):
    """All 169 wheels of blackwell-cu128 are on files.pythonhosted.org and are
    read; its CUDA toolkit (a runfile from developer.download.nvidia.com) is not
    a wheel and provides nothing to the check. pypi-cu130-sm120 holds
    pypi-cu130's wheels (their facts cached by sha256) and patches .py files."""
    assert main(["check", str(REPO / "locks" / f"pylock.{name}.toml")]) == 0
    assert "native check passed" in capsys.readouterr().out


def test_torch_memory_saver_loads_its_cuda_13_hooks_beside_torch_for_cuda_13(
        torch_venv, tmp_path):
    """torch-memory-saver 0.0.10 ships hooks for CUDA 12 (_cu12, and unsuffixed
    for ROCm) and CUDA 13 (_cu13): the check passes it, its CUDA 12 hooks not
    loaded. The package agrees: imported beside torch for CUDA 13 it picks the
    _cu13 hooks, and the loader finds their libcudart.so.13 in the venv (``ldd``;
    a dlopen here would stop first at libcuda.so.1, which only a driver has)."""
    python, _ = torch_venv
    out = tmp_path / "pylock.toml"
    result = _resolve("torch211-runtime-builds", out)
    assert result.native is not None and result.native.ok
    unloaded = {f.object for f in result.native.unloaded
                if f.package == "torch-memory-saver"}
    assert unloaded and not any("_cu13" in o for o in unloaded)
    overlay = _overlay(tmp_path, python, out, "torch-memory-saver")
    (tmp_path / "np").mkdir()
    numpy = _overlay(tmp_path / "np", python, out, "numpy")
    done = subprocess.run(
        [str(python), "-c", "import torch_memory_saver\n"
         "from torch_memory_saver.utils import get_binary_path_from_package as g\n"
         "for s in ('preload', 'torch'):\n"
         "    print(g(f'torch_memory_saver_hook_mode_{s}'))\n"],
        capture_output=True, text=True, check=False, timeout=600,
        env={**os.environ, "PYTHONPATH": f"{overlay}:{numpy}"})
    assert done.returncode == 0, done.stderr
    picked = [Path(line) for line in done.stdout.split()]
    assert [p.name for p in picked] == [
        "torch_memory_saver_hook_mode_preload_cu13.abi3.so",
        "torch_memory_saver_hook_mode_torch_cu13.abi3.so"]
    site = next((python.parent.parent / "lib").glob("python3.12/site-packages"))
    env = {**os.environ, "LD_LIBRARY_PATH": str(site / "nvidia" / "cu13" / "lib")}
    for hook in picked:
        listed = subprocess.run(["ldd", str(hook)], capture_output=True, text=True,
                                env=env, check=False).stdout
        assert "libcudart.so.13 => " + str(site) in listed, listed


def test_torch_2_11_0_with_the_newest_torchaudio_locks_the_one_that_imports(
        torch_venv, tmp_path, capsys):
    """uv locks torchaudio 2.11.1 here, which does not import; stacklock passes it
    over (exit 0) and locks 2.11.0, and the lock says why."""
    python, _ = torch_venv
    out = tmp_path / "pylock.toml"
    code = main(["resolve", str(PROFILES / "torch211-newest-audio-vision.toml"),
                 "-o", str(out), "-v"])  # -v: each line (by default: counted)
    printed = capsys.readouterr().out
    assert code == 0 and "passed over torchaudio 2.11.1" in printed
    data = tomllib.loads(out.read_text())
    pins = {p["name"]: p["version"] for p in data["packages"]}
    assert pins["torchaudio"] == "2.11.0" and pins["torch"] == "2.11.0"
    [passed] = data["tool"]["stacklock"]["check"]["passed-over"]
    assert passed["package"] == "torchaudio" and passed["version"] == "2.11.1"
    # the oracle: 2.11.1 in the torch 2.11.0 venv fails on the symbol named
    unchecked = tmp_path / "pylock.unchecked.toml"
    _resolve("torch211-newest-audio-vision", unchecked, check=False)
    assert _wheel_of(unchecked, "torchaudio")["name"].startswith(
        "torchaudio-2.11.1-")
    overlay = _overlay(tmp_path, python, unchecked, "torchaudio")
    done = _run(python, "import torchaudio", overlay)
    assert done.returncode != 0 and "undefined symbol: " in done.stderr
    symbol = done.stderr.split("undefined symbol: ", 1)[1].split()[0]
    from stacklock.http import make_http_client

    with make_http_client() as http:
        report = check_lock_file(unchecked, http=http, cache_dir=LIVE / "stacklock")
    assert symbol in {f.missing for f in report.findings if f.package == "torchaudio"}


def test_xformers_0_0_35_beside_torch_for_cuda_13_is_refused_and_does_not_import(
        torch_venv, tmp_path):
    python, _ = torch_venv
    with pytest.raises(NativeCheckError) as caught:
        _resolve("torch211-xformers035", tmp_path / "pylock.refused.toml")
    assert "xformers/_C.so needs libcudart.so.12" in str(caught.value)
    unchecked = tmp_path / "pylock.unchecked.toml"
    _resolve("torch211-xformers035", unchecked, check=False)
    overlay = _overlay(tmp_path, python, unchecked, "xformers")
    done = _run(python, "import torch, ctypes\n"
                f"ctypes.CDLL({str(overlay / 'xformers' / '_C.so')!r})", overlay)
    assert done.returncode != 0
    assert "libcudart.so.12: cannot open shared object file" in done.stderr
