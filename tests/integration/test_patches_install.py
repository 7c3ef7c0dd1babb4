"""A patched lock through real ``uv`` and ``stacklock install`` and ``validate``:
the real iniconfig 2.3.1 wheel, resolved from a loopback index with the patch of
tests/data/patches/, installed with the patched bytes and a true RECORD; every
other change still flagged; a patch file that is not the lock's refused before
anything changes; a second install a no-op."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.errors import PatchError, StacklockError
from stacklock.install.run import install_lock
from stacklock.lock import load_lock
from stacklock.lockarchive import Archive
from stacklock.record import record_digest
from stacklock.validate.run import validate
from tests.helpers.install_server import tree_state
from tests.helpers.jsonout import parse_output
from tests.helpers.patched import (
    INICONFIG,
    PARSE_SEMICOLON,
    PATCHED_FILE,
    WHEELS,
    semicolon,
    write_profile,
)

PY = sys.executable


pytestmark = pytest.mark.usefixtures("patched_env")


@pytest.fixture
def lock(tmp_path: Path, patched_index) -> Path:
    profile = write_profile(tmp_path, patched_index.url, patches=[semicolon(tmp_path)])
    out = tmp_path / "locks" / "pylock.patched.toml"
    assert main(["resolve", str(profile), "-o", str(out), "--no-check", "-q"]) == 0
    return out


def _site(venv: Path) -> Path:
    return next(venv.resolve().glob("lib/python*/site-packages"))


def _run(venv: Path, code: str) -> str:
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], check=True,
                          capture_output=True, text=True).stdout.strip()


def _checks(result) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.reason) for c in result.checks}


def test_install_applies_the_patch_and_validate_agrees(tmp_path, lock) -> None:
    venv = tmp_path / "env"
    result = install_lock(lock, venv=venv, python=PY, allow_no_gpu=True)
    assert any(n.startswith("patched iniconfig 2.3.1: ../patches/") for n in
               result.notes)
    site = _site(venv)
    data = (site / PATCHED_FILE).read_bytes()
    declared = load_lock(lock).package("iniconfig").tool.patches[0].files[0].sha256
    assert hashlib.sha256(data).hexdigest() == declared
    assert b'COMMENTCHARS = "#"  # values keep' in data
    # the patch does what it says: ';' no longer cuts a value
    assert _run(venv, PARSE_SEMICOLON) == "a;b"
    # RECORD is true again: importlib.metadata, as pip reads it, sees the bytes
    record = _run(venv, "import importlib.metadata as m; f = [p for p in "
                  "m.distribution('iniconfig').files if str(p) == "
                  f"'{PATCHED_FILE}'][0]; print(f.hash.mode + '=' + f.hash.value, "
                  "f.size)")
    assert record == f"{record_digest(data)} {len(data)}"
    # uv's cache still holds the wheel's own bytes (the file was replaced, not
    # written through a hard link)
    with zipfile.ZipFile(WHEELS / INICONFIG) as zf:
        original = zf.read(PATCHED_FILE)
    cached = [p for p in (tmp_path / "uv-cache").rglob("_parse.py")
              if "iniconfig" in str(p)]
    assert cached and all(p.read_bytes() == original for p in cached)
    checks = _checks(result.validation)
    assert checks["wheel-hashes"][0] == "pass"
    assert checks["uv-pip-check"][0] == "pass"
    assert checks["patches"] == ("pass", "1 applied: iniconfig 2.3.1: "
                                 "../patches/iniconfig-semicolon.patch (values "
                                 "with ';' (URLs, DSNs) were cut at it)")


def test_a_further_edit_of_a_patched_file_is_flagged(tmp_path, lock) -> None:
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    target = _site(venv) / PATCHED_FILE
    before = target.read_bytes()
    target.write_bytes(before + b"# more\n")
    # RECORD edited to match the edit: the declared sha256 still decides
    record = target.parent.parent / "iniconfig-2.3.1.dist-info" / "RECORD"
    record.write_text(record.read_text().replace(
        f"{record_digest(before)},{len(before)}",
        f"{record_digest(target.read_bytes())},{len(before) + 7}"))
    checks = _checks(validate(load_lock(lock), venv=venv, allow_no_gpu=True,
                              gate=False, probes=False))
    assert checks["wheel-hashes"][0] == "fail"
    assert PATCHED_FILE in checks["wheel-hashes"][1]
    assert checks["patches"][0] == "fail"
    assert f"iniconfig: {PATCHED_FILE} is not as patched" in checks["patches"][1]


def test_an_unpatched_file_is_flagged_too(tmp_path, lock) -> None:
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    other = _site(venv) / "iniconfig" / "exceptions.py"
    other.write_bytes(other.read_bytes() + b"\n")
    checks = _checks(validate(load_lock(lock), venv=venv, allow_no_gpu=True,
                              gate=False, probes=False))
    assert checks["wheel-hashes"][0] == "fail"
    assert "iniconfig/exceptions.py" in checks["wheel-hashes"][1]
    assert checks["patches"][0] == "pass"


def test_a_patch_file_not_the_locks_is_refused_before_anything(tmp_path, lock,
                                                               capsys) -> None:
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    before = tree_state(tmp_path / "env.stacklock")
    patch = tmp_path / "patches" / "iniconfig-semicolon.patch"
    patch.write_bytes(patch.read_bytes().replace(b"DSNs", b"DSN"))
    code = main(["install", str(lock), "--venv", str(venv), "--python", PY,
                 "--reinstall", "--no-validate"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "is not the one" in err and "nothing was changed" in err
    assert tree_state(tmp_path / "env.stacklock") == before


def test_a_patched_file_changed_under_uv_fails_the_new_generation(
        tmp_path, lock, patched_index) -> None:
    """The bytes uv installs must be the wheel's (RECORD's) before patching; a
    failure leaves the old venv current and the new generation gone."""
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    current = venv.resolve()
    # a lock whose record says the file patches to other bytes
    text = lock.read_text("utf-8")
    declared = load_lock(lock).package("iniconfig").tool.patches[0].files[0].sha256
    bad = tmp_path / "locks" / "pylock.bad.toml"
    bad.write_text(text.replace(declared, "0" * 64), "utf-8")
    with pytest.raises(PatchError, match="the lock records 0000"):
        install_lock(bad, venv=venv, python=PY, validate=False)
    assert venv.resolve() == current
    assert sorted(p.name for p in (tmp_path / "env.stacklock").iterdir()
                  if p.name.isdigit()) == ["1"]


def test_second_install_is_a_no_op_until_a_patched_file_changes(tmp_path,
                                                               lock) -> None:
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    again = install_lock(lock, venv=venv, python=PY, validate=False)
    assert again.already_installed == 1
    target = _site(venv) / PATCHED_FILE
    target.write_bytes(target.read_bytes().replace(b'"#"', b'"#;"'))
    third = install_lock(lock, venv=venv, python=PY, validate=False)
    assert third.already_installed is None
    assert hashlib.sha256((_site(venv) / PATCHED_FILE).read_bytes()).hexdigest() \
        == load_lock(lock).package("iniconfig").tool.patches[0].files[0].sha256


def test_validate_json_has_the_patches_line(tmp_path, lock, capsys) -> None:
    venv = tmp_path / "env"
    install_lock(lock, venv=venv, python=PY, validate=False)
    code = main(["validate", str(lock), "--venv", str(venv), "--allow-no-gpu",
                 "--json", "--no-probes"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    (patches,) = [c for c in out["checks"] if c["name"] == "patches"]
    assert patches["details"]["applied"][0]["reason"].startswith("values with")


def test_wheel_in_the_artifact_store_checks_the_declared_hash(tmp_path,
                                                              lock) -> None:
    """With the locked wheel in the store, wheel-hashes reads its own RECORD and
    takes the lock's post-patch sha256 for the patched file, and only that."""
    venv = tmp_path / "env"
    result = install_lock(lock, venv=venv, python=PY, allow_no_gpu=True,
                          prefetch=True)
    checks = _checks(result.validation)
    assert checks["wheel-hashes"] == (
        "pass", "1 distributions match the RECORD of the wheel with the locked "
        "sha256")
    target = _site(venv) / PATCHED_FILE
    record = target.parent.parent / "iniconfig-2.3.1.dist-info" / "RECORD"
    # an edit with RECORD edited to match is still not the declared bytes
    edited = target.read_bytes() + b"# more\n"
    target.write_bytes(edited)
    record.write_text(record.read_text().replace(
        record_digest((_site(venv) / PATCHED_FILE).read_bytes()[:-7]),
        record_digest(edited)))
    checks = _checks(validate(load_lock(lock), venv=venv, allow_no_gpu=True,
                              gate=False, probes=False))
    assert checks["wheel-hashes"][0] == "fail"


def test_the_archive_keeps_the_patch_file_and_install_reads_it_there(
        tmp_path, lock, patched_index, capsys) -> None:
    """``stacklock archive`` copies the patch file by its sha256 (no index page
    lists it); once it and the index are gone, ``install --archive`` takes the
    wheel and the patch from the archive, each checked, and applies it."""
    archive = tmp_path / "archive"
    assert main(["archive", str(lock), str(archive), "--json"]) == 0
    report = parse_output(capsys.readouterr().out, "archive")
    (patch,) = [f for f in report["files"] if f["kind"] == "patch"]
    record = load_lock(lock).package("iniconfig").tool.patches[0]
    kept = archive / "files" / record.sha256 / "iniconfig-semicolon.patch"
    assert patch["sha256"] == record.sha256 and kept.is_file()
    assert patch["project"] is None and "iniconfig-semicolon" not in (
        archive / "simple" / "iniconfig" / "index.html").read_text()
    (tmp_path / "patches" / "iniconfig-semicolon.patch").unlink()
    patched_index.files.clear()
    for cache in ("cache", "uv-cache"):
        shutil.rmtree(tmp_path / cache, ignore_errors=True)
    venv = tmp_path / "env"
    result = install_lock(lock, venv=venv, python=PY, allow_no_gpu=True,
                          archive=Archive(url=str(archive)))
    assert result.ok
    assert any("iniconfig-semicolon.patch (not beside the lock)" in n
               for n in result.notes)
    assert _run(venv, PARSE_SEMICOLON) == "a;b"
    # wrong bytes in the archive are refused, the venv untouched
    kept.write_bytes(kept.read_bytes().replace(b"keep", b"kept"))
    shutil.rmtree(tmp_path / "cache")
    before = tree_state(venv)
    with pytest.raises(StacklockError, match="sha256 mismatch"):
        install_lock(lock, venv=venv, python=PY, allow_no_gpu=True, reinstall=True,
                     archive=Archive(url=str(archive)))
    assert tree_state(venv) == before
