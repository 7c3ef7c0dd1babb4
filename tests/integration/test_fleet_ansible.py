"""Fleet runs through a real ``ansible-playbook`` (ansible-core from the test extra)
on hosts that need no network: ``ansible_connection=local``, a broken
``ansible_python_interpreter``, and an ssh host whose port refuses connections."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.fleet.run import find_ansible_playbook
from tests.helpers.data import DATA
from tests.helpers.hostile import refused
from tests.helpers.jsonout import parse_output
from tests.helpers.packs import write_small_pack

PY = sys.executable


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "stacklock", *args], capture_output=True,
                          text=True, timeout=600, check=False, cwd=cwd)


def test_emitted_playbook_passes_ansible_syntax_check(tmp_path: Path) -> None:
    pack = tmp_path / "stack.pack"
    pack.write_bytes(b"a pack is only read by the hosts, never by --emit-playbook")
    out = tmp_path / "site" / "fleet.yml"
    proc = _cli("fleet", "install", str(pack), "--report", str(tmp_path / "fleet"),
                "--emit-playbook", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert f'stacklock_pack: "{pack}"' in text
    assert f'stacklock_fleet_dir: "{tmp_path / "fleet"}"' in text
    check = subprocess.run([find_ansible_playbook(), "--syntax-check", "-i",
                            "localhost,", str(out)], capture_output=True, text=True,
                           timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    again = _cli("fleet", "install", str(pack), "--report", str(tmp_path / "fleet"),
                 "--emit-playbook", str(out))
    assert again.returncode == 0 and out.read_text() == text


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs an ssh client")
def test_unreachable_and_broken_interpreter_hosts(tmp_path: Path) -> None:
    """Neither host gets as far as copying the pack: the first task fails, each
    row says why, and the run still writes the table."""
    pack = write_small_pack(tmp_path / "stack.pack")  # no host gets to copy it
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[gpu]\n"
        f"dead ansible_connection=ssh ansible_host=127.0.0.1 ansible_port=1 "
        f"stacklock_venv={tmp_path}/dead/venv "
        "ansible_ssh_common_args='-o ConnectTimeout=10 -o BatchMode=yes'\n"
        f"broken ansible_connection=local stacklock_venv={tmp_path}/broken/venv "
        f"ansible_python_interpreter={tmp_path}/no-such-python\n")
    report = tmp_path / "fleet"
    proc = _cli("fleet", "install", str(pack), "--inventory", str(inventory),
                "--report", str(report), "--json")
    assert proc.returncode == 1, proc.stderr
    data = parse_output(proc.stdout)
    rows = {h["host"]: h for h in data["hosts"]}
    assert rows["dead"]["verdict"] == "unreachable"
    assert "make the work folder" in rows["dead"]["why"]
    assert rows["broken"]["verdict"] == "fail"
    assert f"{tmp_path}/no-such-python" in rows["broken"]["why"]
    # fleet.json is the same object, less the output's schema key
    assert {"schema": data["schema"], **json.loads((report / "fleet.json").read_text())
            } == data
    assert not (tmp_path / "broken").exists()  # nothing was made on the host
    assert "PLAY RECAP" in (report / "ansible.log").read_text()


@pytest.mark.parametrize("missing", ["pack", "inventory"])
def test_missing_pack_or_inventory_is_one_line_exit_2(tmp_path: Path,
                                                      missing: str) -> None:
    pack, inventory = tmp_path / "stack.pack", tmp_path / "hosts.ini"
    if missing != "pack":
        write_small_pack(pack)
    if missing != "inventory":
        inventory.write_text("node1 ansible_connection=local\n")
    proc = _cli("fleet", "install", str(pack), "--inventory", str(inventory),
                "--report", str(tmp_path / "fleet"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(pack if missing == "pack" else inventory) in proc.stderr
    assert not (tmp_path / "fleet").exists()


def test_no_matching_host_is_exit_2(tmp_path: Path) -> None:
    pack, inventory = write_small_pack(tmp_path / "stack.pack"), tmp_path / "hosts.ini"
    inventory.write_text("node1 ansible_connection=local\n")
    proc = _cli("fleet", "install", str(pack), "--inventory", str(inventory),
                "--limit", "nosuchhost", "--report", str(tmp_path / "fleet"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "nosuchhost" in proc.stderr


def test_a_hostile_lock_in_a_pack_reaches_no_host(tmp_path: Path) -> None:
    """A pack whose lock is hostile (its manifest true to it): ``fleet install``
    reads the lock as ``stacklock install PACK`` does, before Ansible runs, and
    refuses it with the same one line; nothing is made on the local host, no
    wheel unpacked, no playbook run (each host ran the bootstrap before)."""
    hostile = DATA / "hostile" / "locks" / "six-listed-twice.toml"
    pack = write_small_pack(tmp_path / "hostile.pack", lock=hostile.read_bytes())
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"node1 ansible_connection=local "
                         f"ansible_python_interpreter={PY} "
                         f"stacklock_venv={tmp_path}/node1/venv "
                         f"stacklock_python={PY} stacklock_allow_no_gpu=true\n")
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "cache")}
    fleet = subprocess.run([PY, "-m", "stacklock", "fleet", "install", str(pack),
                            "--inventory", str(inventory), "--report",
                            str(tmp_path / "fleet")], capture_output=True, text=True,
                           timeout=600, check=False, env=env)
    line = refused(fleet, "listed twice")
    assert line.startswith(f"stacklock: error: {tmp_path}/cache/packs/"), line
    assert not (tmp_path / "node1").exists()
    assert not (tmp_path / "fleet" / "ansible.log").exists()
    store = tmp_path / "cache" / "artifacts"
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*"))
    direct = subprocess.run([PY, "-m", "stacklock", "install", str(pack), "--venv",
                             str(tmp_path / "node1" / "venv"), "--allow-no-gpu"],
                            capture_output=True, text=True, timeout=600, check=False,
                            env=env)
    assert refused(direct, "listed twice") == line
    assert not (tmp_path / "node1").exists()
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*"))
