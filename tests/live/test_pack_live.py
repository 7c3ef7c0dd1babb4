"""Live: pack the committed pypi-small lock from real PyPI, then install it the
air-gapped way: ``python3 PACK install`` inside a network namespace with no network
(``unshare -n``), an empty HOME (so an empty cache) and a PATH holding a CPython
3.12 and /usr/bin:/bin only (no stacklock, no uv). The venv's own python is the
oracle for what got installed.

The pack carries stacklock's own requirements (uv the largest), and with
``--with-plots`` matplotlib and numpy too; they are downloaded once into a cache
that outlives the run ($STACKLOCK_PACK_TEST_CACHE, else
~/.cache/stacklock-pack-tests): the point of these tests is an install from real,
complete wheels.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.lock import load_lock
from stacklock.pack.format import read_manifest
from stacklock.pack.writer import PackPlan, PackResult, glibc_floor, write_pack
from tests.helpers.data import ROOT
from tests.helpers.uv import python312 as find_python312

pytestmark = pytest.mark.live

LOCK = ROOT / "locks" / "pylock.pypi-small.toml"
CACHE = Path(os.environ.get("STACKLOCK_PACK_TEST_CACHE")
             or Path.home() / ".cache" / "stacklock-pack-tests")
UNSHARE = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pack") / "pypi-small.pack"
    result = write_pack(LOCK, out, cache=CACHE)
    assert isinstance(result, PackResult)
    return result.path


@pytest.fixture(scope="module")
def python312(tmp_path_factory: pytest.TempPathFactory) -> str:
    return find_python312(tmp_path_factory.mktemp("python"))


def _node(python: str, pack: Path, args: list[str], *, home: Path,
          prefix: list[str] = UNSHARE) -> subprocess.CompletedProcess[str]:
    path = f"{Path(python).parent}:/usr/bin:/bin"
    assert shutil.which("uv", path=path) is None
    assert shutil.which("stacklock", path=path) is None
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8"}
    return subprocess.run([*prefix, python, str(pack), *args], env=env, cwd=home,
                          capture_output=True, text=True, timeout=900, check=False)


def _other_python() -> tuple[str, str]:
    """A CPython that is not 3.12: the one running the tests, else a pyenv one."""
    pyenv = Path.home() / ".pyenv/versions/3.1[13]*/bin/python3"
    found = [getattr(sys, "_base_executable", sys.executable),
             *sorted(glob.glob(str(pyenv)))]
    for python in found:
        minor = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, check=True).stdout.strip()
        if minor != "3.12":
            return python, minor
    raise AssertionError("no CPython other than 3.12 on this machine")


def _installed_versions(venv: Path, names: list[str]) -> dict[str, str]:
    code = ("import json, sys, importlib.metadata as m; "
            "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))")
    out = subprocess.run([*UNSHARE, str(venv / "bin/python"), "-c", code, *names],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # this probe's own output, not a verb's


def _state(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_install_offline_with_only_python(small_pack: Path, python312: str,
                                          tmp_path: Path):
    home = tmp_path / "node"
    venv, report = home / "env", home / "report"
    first = _node(python312, small_pack, ["install", "--venv", str(venv),
                                          "--report", str(report)], home=home)
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads((report / "report.json").read_text())["verdict"] == "pass"
    lock = load_lock(LOCK)
    locked = {p.name: str(p.version) for p in lock.packages}
    assert _installed_versions(venv, sorted(locked)) == locked
    imports = "import requests, rich, attrs, socks"
    subprocess.run([*UNSHARE, str(venv / "bin/python"), "-c", imports], check=True)

    again = _node(python312, small_pack, ["install", "--venv", str(venv),
                                          "--report-dir", str(report)], home=home)
    assert again.returncode == 0, again.stderr
    assert "already matches the lock" in again.stdout
    assert "install skipped" in again.stdout

    # a wheel of the lock, and one of the bootstrap's, each altered in a copy
    manifest = read_manifest(small_pack)
    target, before = os.readlink(venv), _state(home)
    for member in (next(m for m in manifest.of_kind("wheel") if "requests" in m.path),
                   next(m for m in manifest.of_kind("tool") if "rich" in m.path)):
        bad = tmp_path / "bad.pack"
        shutil.copyfile(small_pack, bad)
        with bad.open("r+b") as fh:
            fh.seek(member.offset + member.size // 2)
            byte = fh.read(1)
            fh.seek(member.offset + member.size // 2)
            fh.write(bytes([byte[0] ^ 0x20]))
        refused = _node(python312, bad, ["install", "--venv", str(venv)], home=home)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.count("\n") == 1 and "was altered" in refused.stderr
        assert os.readlink(venv) == target
        assert _state(home) == before  # venv, generations, cache: all as they were

    checked = _node(python312, small_pack, ["validate", "--venv", str(venv),
                                            "--report-dir", str(report)], home=home)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "PASS:" in checked.stdout


def test_other_python_and_too_little_disk_change_nothing(small_pack: Path,
                                                         python312: str,
                                                         tmp_path: Path):
    home = tmp_path / "node"
    other, minor = _other_python()
    refused = _node(other, small_pack, ["install", "--venv", "env"], home=home)
    assert refused.returncode == 2
    assert f"made for Python 3.12 (this is {minor})" in refused.stderr
    assert _state(home) == []

    disk = tmp_path / "small-disk"
    disk.mkdir()
    script = (f'mount -t tmpfs -o size=4m tmpfs {disk} && mkdir {disk}/home && '
              f'HOME={disk}/home "$@" install --venv {disk}/env; '
              f'echo "rc=$?"; ls -A {disk} {disk}/home')
    python = python312
    out = subprocess.run(
        [*UNSHARE[:-1], UNSHARE[-1].replace("n", "mn"), "sh", "-c", script, "sh",
         python, str(small_pack)], capture_output=True, text=True, check=False,
        env={"PATH": f"{Path(python).parent}:/usr/bin:/bin"})
    assert "rc=2" in out.stdout, out.stdout + out.stderr
    assert "GB is needed to unpack and install" in out.stderr
    assert out.stdout.split() == ["rc=2", f"{disk}:", "home", f"{disk}/home:"]


def test_pack_list_and_same_bytes_again(small_pack: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]):
    assert main(["pack", "--list", str(small_pack)]) == 0
    text = capsys.readouterr().out
    manifest = read_manifest(small_pack)
    floor = glibc_floor([m.name for m in manifest.members if m.kind != "lock"])
    assert floor is not None  # uv's wheel sets one
    assert f"target: Python 3.12, linux_x86_64, glibc >= {floor}" in text
    assert "wheels of the lock: 11 files" in text
    assert "uv-" in text and "stacklock-0.1.0-py3-none-any.whl" in text
    again = write_pack(LOCK, tmp_path / "again.pack", cache=CACHE)
    assert isinstance(again, PackResult)
    assert again.path.read_bytes() == small_pack.read_bytes()
    plan = write_pack(LOCK, tmp_path / "never.pack", dry_run=True, cache=CACHE)
    assert isinstance(plan, PackPlan) and not (tmp_path / "never.pack").exists()
    assert plan.size == small_pack.stat().st_size
    assert main(["pack", "--list", str(LOCK)]) == 2


def test_plots_only_with_the_flag(small_pack: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]):
    """matplotlib (and numpy with it) is carried only by a pack made with
    --with-plots; the lock's files and the rest of the tools are the same."""
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(CACHE))
    out = tmp_path / "plots.pack"
    code = main(["pack", str(LOCK), "-o", str(out), "--with-plots", "--json"])
    assert code == 0, capsys.readouterr().err
    plain = {m.path for m in read_manifest(small_pack).members}
    plots = {m.path for m in read_manifest(out).members}
    added = {p.split("/")[1].split("-")[0].lower() for p in plots - plain}
    assert not any(p.startswith(("tools/matplotlib-", "tools/numpy-")) for p in plain)
    assert {"matplotlib", "numpy"} <= added
    assert plain < plots  # nothing of the plain pack is left out
    assert all(p.startswith("tools/") for p in plots - plain)
