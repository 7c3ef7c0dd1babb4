"""The ``toolkit`` check: a runfile toolkit at its prefix, and a ``source = "pypi"``
toolkit found inside a real venv by the RECORD of the wheels that installed it.

The pypi cases install, with the real uv, wheels laid out file for file as the real
nvidia-cuda-nvcc 13.0.88, -runtime 13.0.96, -crt 13.0.88 and nvidia-nvvm 13.0.88
wheels (their dist-info recorded in tests/data/cuda/wheel-toolkit, see its
PROVENANCE.md); only the 30 MB nvcc binary is a script printing what the real one
printed for ``--version``. tests/live/test_pypi_toolkit_live.py runs the real one.
"""

from __future__ import annotations

import json
import shutil
from email.parser import HeaderParser
from pathlib import Path

import pytest

from stacklock.cuda.wheels import find_wheel_toolkit, site_packages
from stacklock.install.toolkit import pypi_toolkit_home
from stacklock.lock import Lock, load_lock
from stacklock.validate.run import read_distributions, validate
from stacklock.validate.toolkit import check_toolkit
from tests.helpers.wheelkit import build_wheel, make_venv, uv_install, write_lock

H200 = Path(__file__).resolve().parents[1] / "data" / "validate" / "h200"
WHEELS = Path(__file__).resolve().parents[1] / "data" / "cuda" / "wheel-toolkit"
NVCC_OUT = (WHEELS / "nvcc--version.txt").read_text()
CUDA_PYPI = """
[tool.stacklock.cuda]
version = "13.0.3"
source = "pypi"
platform = "linux-x86_64"
requirements = ["cuda-toolkit[nvcc]==13.0.3"]
"""


@pytest.fixture
def lock() -> Lock:
    return load_lock(H200 / "pylock.h200-cu130.toml")


def test_toolkit_missing_prefix(lock: Lock, tmp_path: Path) -> None:
    result = check_toolkit(lock, prefix=tmp_path / "cuda-13.0")
    assert result.status == "fail"
    where = tmp_path / "cuda-13.0"
    assert result.reason == f"no toolkit at {where} (locked CUDA 13.0.1)"


def test_toolkit_version_json(lock: Lock, tmp_path: Path) -> None:
    (tmp_path / "version.json").write_text(json.dumps(
        {"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}))
    result = check_toolkit(lock, prefix=tmp_path)
    assert result.status == "fail"
    assert result.reason == "version.json says 13.0.2, the lock says 13.0.1"
    (tmp_path / "version.json").write_text(json.dumps(
        {"cuda": {"name": "CUDA SDK", "version": "13.0.1"}}))
    good = check_toolkit(lock, prefix=tmp_path)
    assert good.status == "pass"
    assert f"{tmp_path}/bin/nvcc is missing or does not run" in good.notes


def _real_layout(folder: Path, dist_info: str, nvcc_says: str = NVCC_OUT) -> Path:
    """A wheel with the recorded wheel's name, version, tag and file list."""
    info = WHEELS / dist_info
    meta = HeaderParser().parsestr((info / "METADATA").read_text())
    tag = HeaderParser().parsestr((info / "WHEEL").read_text()).get_all("Tag")[-1]
    paths = [line.split(",")[0] for line in (info / "RECORD").read_text().splitlines()]
    files = {p: b"" for p in paths if ".dist-info/" not in p}
    script = f"#!/bin/sh\ncat <<'EOF'\n{nvcc_says}EOF\n".encode()
    nvcc = [p for p in files if p.endswith("/bin/nvcc")]
    files.update(dict.fromkeys(nvcc, script))
    return build_wheel(folder, meta["Name"], meta["Version"], files, tag=tag,
                       executable=tuple(nvcc))


def _venv_with(tmp_path: Path, names: tuple[str, ...], **kw: str) -> tuple[Path, Lock]:
    wheels = [_real_layout(tmp_path / "wheels", n, **kw) for n in names]
    python = make_venv(tmp_path / "venv")
    uv_install(python, *wheels)
    path = write_lock(tmp_path / "pylock.toml", wheels, extra_tool=CUDA_PYPI)
    return python, load_lock(path)


ALL = ("nvidia_cuda_nvcc-13.0.88.dist-info", "nvidia_cuda_runtime-13.0.96.dist-info",
       "nvidia_cuda_crt-13.0.88.dist-info", "nvidia_nvvm-13.0.88.dist-info")


def test_pypi_toolkit_is_found_where_the_wheels_record_put_nvcc(
        tmp_path: Path) -> None:
    python, lock = _venv_with(tmp_path, ALL)
    dists = read_distributions(python)
    result = check_toolkit(lock, dists=dists)
    site = site_packages(tmp_path / "venv")[0]
    home = site / "nvidia" / "cu13"
    assert result.status == "pass", result.reason
    assert result.reason == (
        f"CUDA 13.0.3 from wheels: nvcc 13.0.88 (nvidia-cuda-nvcc 13.0.88) at "
        f"{home}/bin/nvcc; CUDA_HOME={home}")
    assert result.details["cuda_home"] == str(home)
    assert result.notes == ()  # cuda_runtime.h and cicc are there too
    # install's activation file points CUDA_HOME at the same folder
    assert pypi_toolkit_home(tmp_path / "venv", "13.0.3") == home
    # a whole validate run says so too (no torch, no driver needed for this)
    full = validate(lock, python=python, gate=False, probes=False)
    assert {c.name: c.status for c in full.checks}["toolkit"] == "pass"


def test_pypi_toolkit_without_nvcc_when_the_lock_asks_for_it(tmp_path: Path) -> None:
    python, lock = _venv_with(tmp_path, ALL[1:])  # runtime, crt, nvvm: no nvcc
    result = check_toolkit(lock, dists=read_distributions(python))
    assert result.status == "fail"
    site = site_packages(tmp_path / "venv")[0]
    assert result.reason == ("the lock asks for cuda-toolkit[nvcc]==13.0.3, but no "
                             f"installed wheel put a bin/nvcc in {site}")
    # the runtime headers still give install's activation a CUDA_HOME
    assert pypi_toolkit_home(tmp_path / "venv", "13.0.3") == site / "nvidia" / "cu13"


def test_pypi_nvcc_of_another_release_fails(tmp_path: Path) -> None:
    other = NVCC_OUT.replace("release 13.0, V13.0.88", "release 12.9, V12.9.86")
    python, lock = _venv_with(tmp_path, ALL[:1], nvcc_says=other)
    result = check_toolkit(lock, dists=read_distributions(python))
    assert result.status == "fail"
    assert result.reason.endswith("is release 12.9, the lock says CUDA 13.0.3")


def test_finder_reads_record_not_a_guessed_folder(tmp_path: Path) -> None:
    """An nvcc lying around without a RECORD naming it is not a toolkit."""
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    stray = site / "nvidia" / "cu13" / "bin" / "nvcc"
    stray.parent.mkdir(parents=True)
    stray.write_text("#!/bin/sh\n")
    assert find_wheel_toolkit(site_packages(tmp_path)) is None
    # the real record of nvidia-cuda-nvcc names it: copied in, it is found
    shutil.copytree(WHEELS / ALL[0], site / ALL[0])
    kit = find_wheel_toolkit(site_packages(tmp_path), major=13)
    assert kit is not None
    assert (kit.home, kit.nvcc) == (site / "nvidia" / "cu13", stray)
    assert (kit.distribution, kit.version) == ("nvidia-cuda-nvcc", "13.0.88")
