"""Patches through ``diff``, ``pack`` (an offline install from the pack),
``bisect`` (a patch change is a change of its own, and can be the culprit) and
``snapshot --patches`` (hand edits -> patch -> profile -> resolve -> install gives
the same bytes), on the real iniconfig, six and idna wheels from a loopback index."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.lock import load_lock
from stacklock.pack.tools import make_self_wheel
from stacklock.pack.writer import PackItem, _write, plan_items
from tests.helpers.jsonout import parse_output
from tests.helpers.packs import HEAD
from tests.helpers.patched import (
    PARSE_SEMICOLON,
    PATCHED_FILE,
    SEMICOLON,
    WHEELS,
    resolve_lock,
    semicolon,
)

PY = sys.executable
pytestmark = pytest.mark.usefixtures("patched_env")


def _site(venv: Path) -> Path:
    return next(venv.resolve().glob("lib/python*/site-packages"))


def _run(venv: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), "-c", code],
                          capture_output=True, text=True, check=False)


# -- diff ------------------------------------------------------------------------


def test_diff_shows_patches_added_changed_removed(tmp_path, patched_index,
                                                  capsys) -> None:
    plain = resolve_lock(tmp_path, patched_index.url, patches=[], name="plain")
    patched = resolve_lock(tmp_path, patched_index.url,
                           patches=[semicolon(tmp_path)])
    capsys.readouterr()
    assert main(["diff", str(plain), str(patched), "--json"]) == 0
    data = parse_output(capsys.readouterr().out, "diff")
    (change,) = data["packages"]
    sha = hashlib.sha256(SEMICOLON.read_bytes()).hexdigest()
    assert change["name"] == "iniconfig" and change["change"] == "patched"
    assert change["patches"] == [{"change": "added", "file": SEMICOLON.name,
                                  "old_sha256": None, "new_sha256": sha,
                                  "reason": "values with ';' (URLs, DSNs) were "
                                  "cut at it"}]
    summary = data["summary"]
    assert summary["changes"]["patched"] == summary["aspects"]["patches"] == 1
    assert main(["diff", str(plain), str(patched), "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "| `iniconfig` | patched | 2.3.1 | 2.3.1 | patch " \
        f"{SEMICOLON.name} added: values with ';'" in markdown
    assert "1 patched" in markdown
    # the patch edited: changed, by sha256; dropped: removed
    table = semicolon(tmp_path, reason="values with ';' (URLs, DSN) were cut at it")
    edited = tmp_path / "patches" / SEMICOLON.name
    edited.write_bytes(edited.read_bytes().replace(b"DSNs", b"DSN"))
    changed = resolve_lock(tmp_path, patched_index.url, patches=[table], name="edited")
    capsys.readouterr()
    assert main(["diff", str(patched), str(changed), "--exit-code", "-q"]) == 1
    assert main(["diff", str(patched), str(changed)]) == 0
    text = capsys.readouterr().out
    new = load_lock(changed).package("iniconfig").tool.patches[0].sha256
    assert "1 package changed (1 patched)" in text
    assert main(["diff", str(patched), str(changed), "--format", "markdown"]) == 0
    assert f"patch {SEMICOLON.name} changed ({sha[:12]} -> {new[:12]}): values " \
        "with ';' (URLs, DSN) were cut at it" in capsys.readouterr().out
    assert main(["diff", str(patched), str(plain), "--json"]) == 0
    data = parse_output(capsys.readouterr().out, "diff")
    assert data["packages"][0]["patches"][0]["change"] == "removed"


# -- pack ------------------------------------------------------------------------


def _pack(lock: Path, dest: Path, *, drop_patches: bool = False) -> Path:
    loaded = load_lock(lock)
    assert loaded.target is not None
    planned = plan_items(loaded, loaded.target, no_toolkit=True)
    items = []
    for item in planned:
        if item.kind == "wheel":
            source = WHEELS / item.path.removeprefix("wheels/")
            items.append((item, source))
        elif item.kind != "patch" or not drop_patches:
            items.append((item, None))
    name, data = make_self_wheel()
    items.append((PackItem(path=f"tools/{name}", kind="tool", data=data,
                           size=len(data), sha256=hashlib.sha256(data).hexdigest()),
                  None))
    with dest.open("wb") as fh:
        _write(fh, items, {**HEAD, "lock_sha256": items[0][0].sha256})
    return dest


def test_pack_carries_the_patch_and_installs_it_offline(tmp_path, patched_index,
                                                        capsys) -> None:
    lock = resolve_lock(tmp_path, patched_index.url, patches=[semicolon(tmp_path)])
    pack = _pack(lock, tmp_path / "patched.pack")
    capsys.readouterr()
    assert main(["pack", "--list", str(pack)]) == 0
    listing = capsys.readouterr().out
    assert "patches of the lock ([[patches]]): 1 file" in listing
    shutil.rmtree(tmp_path / "patches")  # only the pack has it now
    patched_index.requests.clear()
    venv = tmp_path / "env"
    assert main(["install", str(pack), "--venv", str(venv), "--python", PY,
                 "--allow-no-gpu", "-q"]) == 0
    assert patched_index.requests == []  # offline: the pack alone
    assert _run(venv, PARSE_SEMICOLON).stdout.strip() == "a;b"
    declared = load_lock(lock).package("iniconfig").tool.patches[0].files[0].sha256
    assert hashlib.sha256((_site(venv) / PATCHED_FILE).read_bytes()).hexdigest() \
        == declared


def test_pack_without_the_patch_is_refused(tmp_path, patched_index, capsys) -> None:
    lock = resolve_lock(tmp_path, patched_index.url, patches=[semicolon(tmp_path)])
    pack = _pack(lock, tmp_path / "patched.pack", drop_patches=True)
    shutil.rmtree(tmp_path / "patches")
    capsys.readouterr()
    assert main(["install", str(pack), "--venv", str(tmp_path / "env"),
                 "--python", PY, "--allow-no-gpu"]) == 2
    err = capsys.readouterr().err
    assert "does not carry it" not in err and "patches iniconfig 2.3.1 with" in err
    assert not (tmp_path / "env").exists()


# -- bisect ----------------------------------------------------------------------


def test_bisect_names_the_patch_as_the_culprit(tmp_path, patched_index, capsys) -> None:
    good = resolve_lock(tmp_path / "good", patched_index.url, patches=[],
                        packages=("iniconfig==2.3.1", "six==1.17.0"), name="good")
    bad = resolve_lock(tmp_path / "bad", patched_index.url,
                       patches=[semicolon(tmp_path / "bad")],
                       packages=("iniconfig==2.3.1", "six==1.17.0", "idna==3.20"),
                       name="bad")
    oracle = PARSE_SEMICOLON.replace("print(", "sys.exit(").replace(
        "['u'])", "['u'] != 'a')")
    capsys.readouterr()
    code = main(["bisect", str(good), str(bad), "--python", PY, "--json",
                 "--dir", str(tmp_path / "bisect"), "--", "python", "-c", oracle])
    captured = capsys.readouterr()
    report = parse_output(captured.out, "bisect")
    assert code == 0, (captured.err, report["steps"])
    first = report["culprits"][0]
    assert [(c["name"], c["old"], c["new"]) for c in
            first["changes"] + first["moved_with_it"]] == [
        ("iniconfig", "2.3.1", "2.3.1")]
    first_bad = load_lock(tmp_path / "bisect" / "pylock.first-bad.toml")
    assert first_bad.package("iniconfig").tool.patches  # the patch, applied
    assert first_bad.package("idna") is None  # without the other change


# -- snapshot --patches ----------------------------------------------------------


def _package_files(venv: Path) -> dict[str, str]:
    site = _site(venv)
    return {str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((site / "iniconfig").rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_snapshot_patches_round_trip(tmp_path, patched_index, capsys) -> None:
    plain = resolve_lock(tmp_path, patched_index.url, patches=[], name="plain")
    edited = tmp_path / "edited"
    assert main(["install", str(plain), "--venv", str(edited), "--python", PY,
                 "--no-validate", "-q"]) == 0
    site = _site(edited)
    parse = site / PATCHED_FILE
    parse.write_bytes(parse.read_bytes().replace(b'"#;"', b'"#"'))
    init = site / "iniconfig" / "__init__.py"  # CRLF line, no final newline
    init.write_bytes(init.read_bytes().replace(
        b'_D = TypeVar("_D")\n', b'_D = TypeVar("_D")  # edited\r\n').rstrip(b"\n"))
    capsys.readouterr()
    assert main(["snapshot", "--venv", str(edited), "--patches", "patches",
                 "-o", str(tmp_path / "snap.toml")]) == 0
    err = capsys.readouterr().err
    assert "wrote patches/iniconfig-2.3.1.patch" in err
    stanza = (tmp_path / "patches" / "patches.toml").read_text()
    assert 'file = "patches/iniconfig-2.3.1.patch"' in stanza
    assert 'versions = "==2.3.1"' in stanza
    profile = tmp_path / "again.toml"
    profile.write_text((tmp_path / "plain.toml").read_text() + stanza)
    again = tmp_path / "locks" / "pylock.again.toml"
    assert main(["resolve", str(profile), "-o", str(again), "--no-check", "-q"]) == 0
    rebuilt = tmp_path / "rebuilt"
    assert main(["install", str(again), "--venv", str(rebuilt), "--python", PY,
                 "--no-validate", "-q"]) == 0
    assert _package_files(rebuilt) == _package_files(edited)
    assert _run(rebuilt, PARSE_SEMICOLON).stdout.strip() == "a;b"
    # the rebuilt venv has nothing left to turn into a patch but its own
    assert main(["snapshot", "--venv", str(rebuilt), "--patches", "again"]) == 0
    assert (tmp_path / "again" / "iniconfig-2.3.1.patch").read_bytes() == \
        (tmp_path / "patches" / "iniconfig-2.3.1.patch").read_bytes()
