"""Live: a real pack of the committed pypi-small lock (made from real PyPI by
``stacklock pack``; its ~60 MB of wheels are cached across runs, see
tests/live/test_pack_live.py) rolled out by a real ``ansible-playbook`` to three hosts
on
``ansible_connection=local``, each with its own venv and cache, the third with a
broken ``ansible_python_interpreter``. The venvs' own pythons are the oracle for what
got installed; re-runs must skip the hosts that still match."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stacklock.lock import load_lock
from stacklock.pack.writer import write_pack
from stacklock.runner import find_uv
from tests.helpers.data import DATA, ROOT
from tests.helpers.jsonout import parse_output
from tests.helpers.uv import python312

pytestmark = pytest.mark.live

LOCK = ROOT / "locks" / "pylock.pypi-small.toml"
# the cache tests/live/test_pack_live.py fills: the pack's wheels are downloaded once
CACHE = Path(os.environ.get("STACKLOCK_PACK_TEST_CACHE")
             or Path.home() / ".cache" / "stacklock-pack-tests")
GOOD = ("node1", "node2")
# a real wheel from PyPI that the lock does not hold (tests/data/install/PROVENANCE.md)
SIX = DATA / "install" / "wheels" / "six-1.17.0-py2.py3-none-any.whl"


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pack") / "pypi-small.pack"
    return write_pack(LOCK, out, cache=CACHE).path


def _inventory(folder: Path, python: str, broken: str) -> Path:
    lines = ["[gpu]"]
    for host in (*GOOD, "node3"):
        lines.append(f"{host} stacklock_venv={folder}/{host}/venv "
                     f"stacklock_cache_dir={folder}/{host}/cache"
                     + (f" ansible_python_interpreter={broken}"
                        if host == "node3" else ""))
    lines += ["", "[gpu:vars]", "ansible_connection=local",
              f"ansible_python_interpreter={sys.executable}",
              f"stacklock_python={python}", "stacklock_allow_no_gpu=true", ""]
    path = folder / "hosts.ini"
    path.write_text("\n".join(lines))
    return path


def _fleet(*args: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "stacklock", "fleet", *args,
                           "--json"], capture_output=True, text=True, timeout=900,
                          check=False)
    assert proc.stdout, proc.stderr
    return proc.returncode, parse_output(proc.stdout)


def _versions(venv: Path, names: list[str]) -> dict[str, str]:
    code = ("import json, sys, importlib.metadata as m; "
            "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))")
    out = subprocess.run([str(venv / "bin/python"), "-c", code, *names],
                         capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def test_three_hosts_one_broken(small_pack: Path, tmp_path: Path) -> None:
    broken = str(tmp_path / "no-such-python3")
    inventory = _inventory(tmp_path, python312(tmp_path), broken)
    report = tmp_path / "fleet"
    code, data = _fleet("install", str(small_pack), "--inventory", str(inventory),
                        "--report", str(report))
    assert code == 1
    rows = {h["host"]: h for h in data["hosts"]}
    assert sorted(rows) == ["node1", "node2", "node3"]
    assert data["counts"] == {"pass": 2, "fail": 1, "unreachable": 0}
    assert rows["node3"]["verdict"] == "fail" and broken in rows["node3"]["why"]
    assert not (tmp_path / "node3").exists()  # nothing was made on the broken host
    locked = {p.name: str(p.version) for p in load_lock(LOCK).packages}
    for host in GOOD:
        assert rows[host]["verdict"] == "pass" and rows[host]["install"] == "installed"
        assert _versions(tmp_path / host / "venv", sorted(locked)) == locked
        gathered = json.loads((report / host / "report.json").read_text())
        assert gathered["verdict"] == "pass"
        assert (report / host / "report.md").is_file()
    assert {"schema": data["schema"], **json.loads((report / "fleet.json").read_text())
            } == data
    assert "| node3 | FAIL |" in (report / "fleet.md").read_text()

    # a package added to node1's venv since: node1 runs again, node2 is skipped
    held = tmp_path / "node1" / "venv"
    first_generation = held.resolve()
    subprocess.run([find_uv(), "pip", "install", "--no-index", "--python",
                    str(held / "bin/python"), str(SIX)], check=True,
                   capture_output=True)
    code, again = _fleet("install", str(small_pack), "--inventory", str(inventory),
                         "--report", str(report))
    assert code == 1
    rows = {h["host"]: h for h in again["hosts"]}
    assert (rows["node1"]["install"], rows["node1"]["verdict"]) == ("installed", "pass")
    assert held.resolve() != first_generation
    assert (rows["node2"]["install"], rows["node2"]["verdict"]) == ("skipped", "pass")
    assert rows["node3"]["verdict"] == "fail"

    code, rendered = _fleet("report", str(report))
    assert code == 1 and rendered == again
