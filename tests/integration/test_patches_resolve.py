"""``[[patches]]`` through ``stacklock resolve``: the real iniconfig wheel from a
loopback index, its patched file's sha256 in the lock, range reads of only what
is needed, and every refusal as one line with nothing written."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.errors import LockError
from stacklock.lock import load_lock
from stacklock.lock.read import parse_lock
from tests.helpers.patched import (
    INICONFIG,
    PATCHED_FILE,
    SEMICOLON,
    WHEELS,
    semicolon,
    serve_index,
    write_profile,
)


def _patched_bytes() -> bytes:
    with zipfile.ZipFile(WHEELS / INICONFIG) as zf:
        original = zf.read(PATCHED_FILE)
    return original.replace(b'COMMENTCHARS = "#;"\n',
                            b'COMMENTCHARS = "#"  # values keep their ";" (URLs, '
                            b'DSNs)\n')


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(folder))
    return folder


def _resolve(profile: Path, out: Path, *more: str) -> int:
    return main(["resolve", str(profile), "-o", str(out), "--no-check", *more])


def test_lock_records_patch_and_patched_sha256(tmp_path, cache, capsys) -> None:
    out = tmp_path / "locks" / "pylock.patched.toml"
    with serve_index() as index:
        profile = write_profile(tmp_path, index.url, patches=[semicolon(tmp_path)])
        assert _resolve(profile, out, "-v") == 0
        reads = index.fetched(INICONFIG)
    printed = capsys.readouterr().out
    assert "patch: iniconfig 2.3.1: patches/iniconfig-semicolon.patch (1 file): " \
        "values with ';'" in printed
    lock = load_lock(out)
    (record,) = lock.package("iniconfig").tool.patches
    assert record.path == "../patches/iniconfig-semicolon.patch"
    assert record.sha256 == hashlib.sha256(SEMICOLON.read_bytes()).hexdigest()
    assert record.size == len(SEMICOLON.read_bytes())
    assert record.reason == "values with ';' (URLs, DSNs) were cut at it"
    assert [(f.path, f.sha256) for f in record.files] == [
        (PATCHED_FILE, hashlib.sha256(_patched_bytes()).hexdigest())]
    # range reads only: the wheel was never asked for whole
    assert reads and all(r is not None and r.startswith("bytes=") for r in reads)
    # the lock reads back to the same bytes
    from stacklock.lock.write import render_lock

    assert render_lock(lock) == out.read_text()


def test_default_output_says_the_patches_apply(tmp_path, cache, capsys) -> None:
    """Without -v, resolve counts the patches applied (as it counts overrides),
    so ``--upgrade-package`` of a patched package says they still apply."""
    out = tmp_path / "locks" / "pylock.patched.toml"
    with serve_index() as index:
        profile = write_profile(tmp_path, index.url, patches=[semicolon(tmp_path)])
        assert _resolve(profile, out) == 0
        capsys.readouterr()
        assert _resolve(profile, out, "--upgrade-package", "iniconfig") == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.endswith("; 1 patch applied (-v shows them)"), line


def test_server_without_ranges_costs_one_download(tmp_path, cache) -> None:
    out = tmp_path / "pylock.toml"
    with serve_index() as index:
        index.ranges = False
        profile = write_profile(tmp_path, index.url, patches=[semicolon(tmp_path)])
        assert _resolve(profile, out) == 0
        assert index.fetched(INICONFIG).count(None) == 1  # one whole read, kept
    (record,) = load_lock(out).package("iniconfig").tool.patches
    assert record.files[0].sha256 == hashlib.sha256(_patched_bytes()).hexdigest()


def test_patch_changes_the_replay_key(tmp_path, cache) -> None:
    """An edited patch beside an unchanged profile is resolved again, not
    replayed from the last lock."""
    out = tmp_path / "pylock.toml"
    with serve_index() as index:
        profile = write_profile(tmp_path, index.url, patches=[semicolon(tmp_path)])
        assert _resolve(profile, out) == 0
        first = load_lock(out).package("iniconfig").tool.patches[0]
        patch = tmp_path / "patches" / SEMICOLON.name
        patch.write_bytes(patch.read_bytes().replace(b'# values keep',
                                                     b'# values do keep'))
        assert _resolve(profile, out) == 0
    second = load_lock(out).package("iniconfig").tool.patches[0]
    assert second.sha256 != first.sha256
    assert second.files[0].sha256 != first.files[0].sha256


def _refused(tmp_path: Path, capsys, patch: dict[str, str], *, code: int,
             expected: str, patch_text: bytes | None = None,
             packages: tuple[str, ...] = ("iniconfig==2.3.1",)) -> None:
    out = tmp_path / "locks" / "pylock.toml"
    if patch_text is not None:
        (tmp_path / "patches").mkdir(exist_ok=True)
        (tmp_path / patch["file"]).write_bytes(patch_text)
    with serve_index(names=(INICONFIG, "six-1.17.0-py2.py3-none-any.whl")) as index:
        profile = write_profile(tmp_path, index.url, patches=[patch],
                                packages=packages)
        assert _resolve(profile, out) == code
    err = capsys.readouterr().err.strip()
    assert expected in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()  # nothing written


def _one_line_patch(path: str, old: str, new: str) -> bytes:
    return (f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n").encode()


def test_patch_that_does_not_apply_exits_1(tmp_path, cache, capsys) -> None:
    text = SEMICOLON.read_bytes().replace(b'-COMMENTCHARS = "#;"',
                                          b'-COMMENTCHARS = "#;!"')
    _refused(tmp_path, capsys, {"package": "iniconfig", "file": "patches/x.patch",
                                "reason": "r"}, patch_text=text, code=1,
             expected="iniconfig 2.3.1: patches/x.patch: iniconfig/_parse.py: "
             "hunk 1 (@@ -4,7 +4,7 @@) does not apply: line 7 is "
             "'COMMENTCHARS = \"#;\"', the patch expects 'COMMENTCHARS = \"#;!\"'")


def test_versions_that_exclude_the_locked_one_exit_1(tmp_path, cache, capsys) -> None:
    _refused(tmp_path, capsys, semicolon(tmp_path, versions="<2.3"), code=1,
             expected="iniconfig 2.3.1 is locked, and patches[0] "
             "(patches/iniconfig-semicolon.patch) is written for iniconfig<2.3")


def test_package_not_in_the_lock(tmp_path, cache, capsys) -> None:
    _refused(tmp_path, capsys, semicolon(tmp_path, package="sglang"), code=2,
             expected="patches[0]: sglang is not in the lock")


def test_file_not_in_record(tmp_path, cache, capsys) -> None:
    _refused(tmp_path, capsys, {"package": "iniconfig", "file": "patches/x.patch",
                                "reason": "r"}, code=2,
             patch_text=_one_line_patch("iniconfig/evil.py", "a", "b"),
             expected="iniconfig/evil.py is not a file the wheel's RECORD lists")


def test_folder_of_the_wheel(tmp_path, cache, capsys) -> None:
    _refused(tmp_path, capsys, {"package": "iniconfig", "file": "patches/x.patch",
                                "reason": "r"}, code=2,
             patch_text=_one_line_patch("iniconfig", "a", "b"),
             expected="iniconfig is a folder in the wheel")


def test_file_of_another_package(tmp_path, cache, capsys) -> None:
    _refused(tmp_path, capsys, {"package": "iniconfig", "file": "patches/x.patch",
                                "reason": "r"}, code=2,
             packages=("iniconfig==2.3.1", "six==1.17.0"),
             patch_text=_one_line_patch("six.py", "a", "b"),
             expected="six.py is not a file the wheel's RECORD lists")


def test_hostile_patch_file_is_refused_before_resolving(tmp_path, cache,
                                                        capsys) -> None:
    _refused(tmp_path, capsys, {"package": "iniconfig", "file": "patches/x.patch",
                                "reason": "r"}, code=2,
             patch_text=_one_line_patch("../../etc/passwd", "a", "b"),
             expected="patches/x.patch: ../../etc/passwd: holds '..'")


@pytest.mark.parametrize(("table", "expected"), [
    ({"package": "iniconfig", "file": "p.patch"}, "patches[0].reason: missing"),
    ({"package": "iniconfig", "file": "p.patch", "reason": "r", "why": "x"},
     "patches[0].why: unknown key 'why'"),
    ({"package": "iniconfig", "file": "p.patch", "reason": "r", "versions": "~~1"},
     "patches[0].versions: '~~1' is not a version specifier"),
    ({"package": "iniconfig", "file": "missing.patch", "reason": "r"},
     "missing.patch: no such patch file"),
])
def test_profile_keys_are_strict(tmp_path, cache, capsys, table, expected) -> None:
    (tmp_path / "p.patch").write_bytes(SEMICOLON.read_bytes())
    profile = write_profile(tmp_path, "http://127.0.0.1:9", patches=[table])
    assert _resolve(profile, tmp_path / "out.toml") == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1


LOCK_HEAD = """lock-version = "1.0"
created-by = "stacklock"

[[packages]]
name = "iniconfig"
version = "2.3.1"

[[packages.wheels]]
name = "iniconfig-2.3.1-py3-none-any.whl"
url = "https://example.invalid/iniconfig-2.3.1-py3-none-any.whl"
hashes = {sha256 = "9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7"}

[[packages.tool.stacklock.patches]]
"""
GOOD = {"path": '"p.patch"', "sha256": f'"{"a" * 64}"', "size": "3",
        "reason": '"r"', "files": f'[{{path = "x/y.py", sha256 = "{"b" * 64}"}}]'}


@pytest.mark.parametrize(("change", "expected"), [
    ({"sha256": '"abc"'}, "patches[0].sha256: 'abc' is not a sha256"),
    ({"size": '"3"'}, "patches[0].size: expected a positive integer"),
    ({"files": "[]"}, "patches[0].files: a patch changes at least one file"),
    ({"files": f'[{{path = "../x.py", sha256 = "{"b" * 64}"}}]'},
     "patches[0].files[0].path: '../x.py'"),
    ({"extra": '"x"'}, "patches[0].extra: unknown key 'extra'"),
])
def test_lock_reader_is_strict_about_patches(change, expected) -> None:
    table = {**GOOD, **change}
    text = LOCK_HEAD + "".join(f"{k} = {v}\n" for k, v in table.items())
    with pytest.raises(LockError, match=None) as err:
        parse_lock(text.encode(), path="pylock.toml")
    assert expected in str(err.value), str(err.value)
    assert str(err.value).startswith("pylock.toml: packages[0].tool.stacklock.")


def test_second_resolve_reads_no_wheel_and_works_offline(tmp_path, cache) -> None:
    """What a wheel and its patches give is kept (cache/patched/): another
    resolve of an edited profile reads no wheel again, and --offline works."""
    out = tmp_path / "pylock.toml"
    with serve_index() as index:
        profile = write_profile(tmp_path, index.url, patches=[semicolon(tmp_path)])
        assert _resolve(profile, out) == 0
        first = load_lock(out).package("iniconfig").tool.patches
        assert list((cache / "patched").glob("*.json"))
        index.requests.clear()
        profile.write_text(profile.read_text().replace('"patched"', '"edited"', 1))
        assert _resolve(profile, out) == 0  # another profile: not a replay
        assert index.fetched(INICONFIG) == []
    assert load_lock(out).package("iniconfig").tool.patches == first
    # the index is gone now; another profile again, so no replay either
    profile.write_text(profile.read_text().replace('"edited"', '"offline"', 1))
    assert _resolve(profile, out, "--offline") == 0
    assert load_lock(out).package("iniconfig").tool.patches == first


def test_edited_patch_is_applied_again_not_remembered(tmp_path, cache) -> None:
    out = tmp_path / "pylock.toml"
    with serve_index() as index:
        profile = write_profile(tmp_path, index.url, patches=[semicolon(tmp_path)])
        assert _resolve(profile, out) == 0
        patch = tmp_path / "patches" / SEMICOLON.name
        patch.write_bytes(patch.read_bytes().replace(b'"#;"', b'"#;!"'))
        assert _resolve(profile, out) == 1  # the edited patch no longer applies
