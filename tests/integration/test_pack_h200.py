"""The record of a pack installed on a real H200 machine with no network
(tests/data/pack-h200/): it installed the committed lock, byte for byte, and its
report passes; a tampered copy was refused there without touching the venv."""

from __future__ import annotations

import hashlib
import json

from stacklock.lock import load_lock
from stacklock.validate.report import ValidateResult
from tests.helpers.data import DATA, ROOT

RECORD = DATA / "pack-h200"
LOCK = ROOT / "locks" / "pylock.pypi-small.toml"


def test_the_h200_report_passes_for_the_committed_lock():
    report = ValidateResult.from_dict(json.loads((RECORD / "report.json").read_text()))
    assert report.ok
    sha = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    assert report.lock is not None and f"/packs/{sha}/" in report.lock
    lock = load_lock(LOCK)
    checks = {c.name: c for c in report.checks}
    assert checks["distributions"].details["locked"] == len(lock.packages)
    assert checks["wheel-hashes"].status == "pass"
    versions = {p.name: str(p.version) for p in lock.packages}
    assert checks["import:requests"].reason == f"imports ({versions['requests']})"
    assert checks["import:attrs"].reason == f"imports ({versions['attrs']})"


def test_the_h200_log_shows_an_offline_node_and_a_refused_tampered_copy():
    log = (RECORD / "node-log.txt").read_text()
    sections = dict(part.split("\n", 1) for part in log.split("== ")[1:])
    node = sections["node"]
    assert "uv on PATH=/usr/bin:/bin: none" in node
    assert "stacklock on PATH=/usr/bin:/bin: none" in node
    assert "Python 3.12.3" in node and "NVIDIA H200" in node
    assert "rc=0" in sections["install"]
    assert sections["install again"].splitlines()[:2] == [
        "rc=0", "/tmp/node/env already matches the lock in pypi-small.pack; "
        "install skipped"]
    tampered = sections["tampered"].splitlines()
    assert tampered[0].startswith("stacklock: error: ") and "was altered" in tampered[0]
    assert tampered[1] == "rc=2" and tampered[2].startswith("venv untouched:")
    assert sections["validate"].splitlines()[0] == "rc=0"
    versions = {p.name: str(p.version) for p in load_lock(LOCK).packages}
    assert sections["imports"].split() == [versions["requests"], versions["attrs"]]
