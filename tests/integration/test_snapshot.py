"""stacklock snapshot: a PEP 751 lock of what a venv holds."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.pylock import Pylock
from uv import find_uv_bin

from stacklock.cli import main
from stacklock.errors import InstallError, LockError
from stacklock.install.run import install_lock
from stacklock.lock import FoundToolkit
from stacklock.lock.write import render_lock
from stacklock.snapshot import make_snapshot
from tests.helpers.install_server import DATA, Served, local_lock, sha256

PY = sys.executable
UV = str(find_uv_bin())
SIX = DATA / "wheels" / "six-1.17.0-py2.py3-none-any.whl"


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("STACKLOCK_DRIVER_VERSION", "580.159.04")


def _plain_venv(path: Path) -> Path:
    subprocess.run([UV, "venv", "-q", "--python", PY, str(path)], check=True)
    return path


def test_cli_snapshot_of_an_installed_venv_matches_its_lock(
    server: tuple[str, Served], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    install_lock(lock, venv=tmp_path / "env", python=PY, validate=False)
    out = tmp_path / "pylock.snap.toml"
    assert main(["snapshot", "--venv", str(tmp_path / "env"), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    data = tomllib.loads(out.read_text())
    Pylock.from_dict(data)
    assert data["tool"]["stacklock"]["snapshot"] is True
    assert data["tool"]["stacklock"]["driver"] == "580.159.04"
    locked = tomllib.loads(lock.read_text())
    want = {
        (p["name"], p["version"], p["wheels"][0]["url"]) for p in locked["packages"]
    }
    got = {(p["name"], p["version"], p["wheels"][0]["url"]) for p in data["packages"]}
    assert got == want
    # printed to stdout without -o
    assert main(["snapshot", "--venv", str(tmp_path / "env")]) == 0
    assert capsys.readouterr().out.startswith("# snapshot of ")


def test_index_install_without_record_is_unknown_origin(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    served.files["/files/" + SIX.name] = SIX.read_bytes()
    served.files["/simple/six/"] = (
        f'<a href="/files/{SIX.name}#sha256={sha256(SIX)}">{SIX.name}</a>'
    ).encode()
    venv = _plain_venv(tmp_path / "env")
    subprocess.run(
        [UV, "pip", "install", "-q", "--python", str(venv / "bin/python"),
         "--index-url", f"{base}/simple", "six"],
        check=True,
    )  # fmt: skip
    snapshot = make_snapshot(venv)
    Pylock.from_dict(tomllib.loads(render_lock(snapshot)))
    (six,) = snapshot.packages
    assert (six.name, str(six.version)) == ("six", "1.17.0")
    assert six.entry.directory is not None
    assert six.entry.directory.path.endswith("six-1.17.0.dist-info")
    assert snapshot.snapshot is not None
    assert snapshot.snapshot.unknown_origin == ("six",)
    assert len(six.tool.record_sha256 or "") == 64
    # such a snapshot is for diffing; install refuses it with a clear error
    snap = tmp_path / "pylock.snap.toml"
    assert main(["snapshot", "--venv", str(venv), "-o", str(snap)]) == 0
    with pytest.raises(LockError,
                       match=r"packages\[0\] \(six\): neither a wheel nor an sdist"):
        install_lock(snap, venv=tmp_path / "other", python=PY)


def test_toolkit_named_by_the_activation_file(tmp_path: Path) -> None:
    venv = _plain_venv(tmp_path / "env")
    prefix = tmp_path / "cuda-13.0"
    prefix.mkdir()
    (prefix / "version.json").write_text(json.dumps({"cuda": {"version": "13.0.1"}}))
    (venv / "stacklock-activate.sh").write_text(f"export CUDA_HOME='{prefix}'\n")
    snapshot = make_snapshot(venv).snapshot
    assert snapshot is not None and snapshot.toolkit == FoundToolkit(
        version="13.0.1", prefix=str(prefix))
    python = ".".join(map(str, sys.version_info[:3]))
    assert str(make_snapshot(venv).requires_python) == f"=={python}"


def test_not_a_venv(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="not a virtual environment"):
        make_snapshot(tmp_path)


def test_toolkit_without_version_json_is_read_from_nvcc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Toolkits installed from packages (the H200 image's) ship no version.json:
    the prefix's nvcc says the release. Its output is the real one recorded there."""
    probe = (DATA.parent / "real" / "device" / "h200-environment-probe.txt").read_text()
    start = probe.index("nvcc: NVIDIA (R) Cuda compiler driver")
    output = "\n".join(probe[start:].splitlines()[:5]) + "\n"
    prefix = tmp_path / "cuda"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "output.txt").write_text(output)
    nvcc = prefix / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\ncat '{prefix / 'bin' / 'output.txt'}'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(prefix))
    snapshot = make_snapshot(_plain_venv(tmp_path / "env")).snapshot
    assert snapshot is not None and snapshot.toolkit == FoundToolkit(
        version="13.0", nvcc="13.0.88", prefix=str(prefix), source="nvcc --version")
