"""The patch reader and applier on their own: exact application (line endings,
"No newline at end of file", offsets), and every refusal of a hostile patch as
one PatchError naming the file."""

from __future__ import annotations

import difflib
import hashlib

import pytest

from stacklock.errors import PatchConflictError, PatchError
from stacklock.patches import apply_patches, parse_patch
from stacklock.patches.read import MAX_PATCH_BYTES, load_patch
from tests.helpers.patched import PATCHED_FILE, SEMICOLON, WHEELS

OLD = b"import os\n\ndef f():\n    return 1\n\nX = {9: 1, 10: 2}\n"
NEW = b"import os\n\ndef f():\n    return 2\n\nX = {9: 1, 10: 2, 12: 3}\n"


def _diff(old: bytes, new: bytes, path: str = "pkg/m.py", n: int = 1) -> bytes:
    """A unified diff as ``diff -u`` writes it, markers included."""
    out = []
    for line in difflib.unified_diff(old.decode().splitlines(True),
                                     new.decode().splitlines(True),
                                     f"a/{path}", f"b/{path}", n=n):
        out.append(line if line.endswith("\n")
                   else line + "\n\\ No newline at end of file\n")
    return "".join(out).encode()


def _apply(patch: bytes, files: dict[str, bytes]) -> dict[str, bytes]:
    changed, _ = apply_patches(files, [(parse_patch(patch, where="x.patch"),
                                        "x.patch")], package="pkg", version="1.0")
    return changed


def test_applies_exactly_and_keeps_bytes() -> None:
    assert _apply(_diff(OLD, NEW), {"pkg/m.py": OLD}) == {"pkg/m.py": NEW}


def test_crlf_file_keeps_its_line_endings() -> None:
    old, new = OLD.replace(b"\n", b"\r\n"), NEW.replace(b"\n", b"\r\n")
    assert _apply(_diff(old, new), {"pkg/m.py": old}) == {"pkg/m.py": new}
    # an LF patch does not apply to the CRLF file: no line matches
    with pytest.raises(PatchConflictError):
        _apply(_diff(OLD, NEW), {"pkg/m.py": old})


def test_no_newline_at_end_of_file_both_ways() -> None:
    old, new = OLD.rstrip(b"\n"), NEW.rstrip(b"\n")
    patch = _diff(old, new)
    assert b"\\ No newline at end of file" in patch
    assert _apply(patch, {"pkg/m.py": old}) == {"pkg/m.py": new}
    assert _apply(_diff(old, NEW), {"pkg/m.py": old}) == {"pkg/m.py": NEW}
    assert _apply(_diff(OLD, new), {"pkg/m.py": OLD}) == {"pkg/m.py": new}


def test_moved_code_applies_once_found_once_and_is_reported() -> None:
    moved = b"# one\n# two\n" + OLD
    changed, notes = apply_patches(
        {"pkg/m.py": moved}, [(parse_patch(_diff(OLD, NEW), where="x"), "x")],
        package="pkg", version="1")
    assert changed == {"pkg/m.py": b"# one\n# two\n" + NEW}
    assert notes == ["x: pkg/m.py: hunk 1 applied 2 lines below its header's"]


def test_lines_found_twice_do_not_apply() -> None:
    twice = b"# x\n" + OLD + OLD
    with pytest.raises(PatchConflictError) as err:
        _apply(_diff(OLD, NEW), {"pkg/m.py": twice})
    assert err.value.exit_code == 1
    assert err.value.hunk == 1 and err.value.path == "pkg/m.py"


def test_conflict_names_package_version_file_hunk_and_line() -> None:
    other = OLD.replace(b"return 1", b"return 3")
    with pytest.raises(PatchConflictError) as err:
        _apply(_diff(OLD, NEW), {"pkg/m.py": other})
    text = str(err.value)
    assert "pkg 1.0: x.patch: pkg/m.py: hunk 1 (@@ -3,4 +3,4 @@) does not apply" \
        in text
    assert "line 4 is '    return 3', the patch expects '    return 1'" in text
    assert "\n" not in text


def test_patches_of_one_file_apply_in_order() -> None:
    mid = NEW
    last = NEW.replace(b"12: 3", b"12: 4")
    first, second = parse_patch(_diff(OLD, mid), where="1"), \
        parse_patch(_diff(mid, last), where="2")
    changed, _ = apply_patches({"pkg/m.py": OLD}, [(first, "1"), (second, "2")],
                               package="pkg", version="1")
    assert changed == {"pkg/m.py": last}


def test_the_recorded_patch_against_the_real_wheel() -> None:
    import zipfile

    with zipfile.ZipFile(WHEELS / "iniconfig-2.3.1-py3-none-any.whl") as zf:
        original = zf.read(PATCHED_FILE)
    patch = load_patch(SEMICOLON)
    assert patch.paths == (PATCHED_FILE,)
    assert patch.sha256 == hashlib.sha256(SEMICOLON.read_bytes()).hexdigest()
    changed = _apply(SEMICOLON.read_bytes(), {PATCHED_FILE: original})
    assert changed[PATCHED_FILE] == original.replace(
        b'COMMENTCHARS = "#;"\n',
        b'COMMENTCHARS = "#"  # values keep their ";" (URLs, DSNs)\n')


def _header(path: str = "pkg/m.py") -> bytes:
    return f"--- a/{path}\n+++ b/{path}\n".encode()


HOSTILE = {
    "empty": (b"", "changes no file"),
    "prose": (b"hello\nworld\n", "changes no file"),
    "binary-git": (b"diff --git a/pkg/x.so b/pkg/x.so\nindex 1..2 100644\n"
                   b"GIT binary patch\nliteral 0\n", "a binary change"),
    "binary-diff": (b"Binary files a/pkg/x.so and b/pkg/x.so differ\n",
                    "a binary change"),
    "nul": (_header() + b"@@ -1 +1 @@\n-a\0\n+b\n", "NUL bytes"),
    "dotdot": (_header("../etc/passwd") + b"@@ -1 +1 @@\n-a\n+b\n", "outside"),
    "absolute": (b"--- a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
                 "not a plain relative path"),
    "no-prefix": (b"--- pkg/m.py\n+++ pkg/m.py\n@@ -1 +1 @@\n-a\n+b\n",
                  "a/PATH and b/PATH"),
    "dev-null": (b"--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+b\n",
                 "adds a file"),
    "delete": (b"--- a/pkg/m.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
               "deletes a file"),
    "rename": (b"--- a/pkg/m.py\n+++ b/pkg/n.py\n@@ -1 +1 @@\n-a\n+b\n", "renames"),
    "symlink": (b"diff --git a/pkg/l b/pkg/l\nnew file mode 120000\n"
                b"--- /dev/null\n+++ b/pkg/l\n@@ -0,0 +1 @@\n+/etc/passwd\n",
                "adds a file"),
    "symlink-changed": (b"diff --git a/pkg/l b/pkg/l\nindex 1..2 120000\n"
                        b"--- a/pkg/l\n+++ b/pkg/l\n@@ -1 +1 @@\n-x\n+/etc/passwd\n",
                        "a symlink"),
    "mode": (b"diff --git a/pkg/m.py b/pkg/m.py\nold mode 100644\nnew mode 100755\n",
             "file mode"),
    "crlf-saved": (_header().replace(b"\n", b"\r\n") + b"@@ -1 +1 @@\r\n-a\r\n+b\r\n",
                   "CRLF"),
    "dist-info": (_header("pkg-1.0.dist-info/METADATA") + b"@@ -1 +1 @@\n-a\n+b\n",
                  "dist-info"),
    "twice": (_header() + b"@@ -1 +1 @@\n-a\n+b\n" + _header()
              + b"@@ -3 +3 @@\n-c\n+d\n", "changed twice"),
    "short-hunk": (_header() + b"@@ -1,3 +1,3 @@\n-a\n+b\n", "not a unified diff"),
    "marker-inside": (_header() + b"@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of "
                      b"file\n-b\n+c\n+d\n", "before the last line"),
    "only-in": (b"Only in b/pkg: new.py\n", "only one side has"),
    "backwards": (_header() + b"@@ -5 +5 @@\n-a\n+b\n@@ -1 +1 @@\n-c\n+d\n",
                  "starts before"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_patch_is_one_patch_error(case: str) -> None:
    data, expected = HOSTILE[case]
    with pytest.raises(PatchError) as err:
        parse_patch(data, where="evil.patch")
    assert type(err.value) is PatchError and err.value.exit_code == 2
    text = str(err.value)
    assert text.startswith("evil.patch: ") and expected in text, text
    assert "\n" not in text


def test_huge_patch_and_long_line_are_refused(tmp_path) -> None:
    big = tmp_path / "big.patch"
    big.write_bytes(b"x" * (MAX_PATCH_BYTES + 1))
    with pytest.raises(PatchError, match="larger than 4 MiB"):
        load_patch(big)
    with pytest.raises(PatchError, match="longer than"):
        parse_patch(_header() + b"@@ -1 +1 @@\n-" + b"a" * (300 << 10) + b"\n+b\n",
                    where="x")


@pytest.mark.parametrize("kind", ["fifo", "folder", "missing"])
def test_patch_file_that_is_not_a_file(tmp_path, kind: str) -> None:
    import os

    path = tmp_path / "p.patch"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    with pytest.raises(PatchError) as err:
        load_patch(path)
    assert ("no such patch file" if kind == "missing" else "not a regular file") \
        in str(err.value)


def test_binary_target_file_is_refused() -> None:
    with pytest.raises(PatchError, match="is a binary file") as err:
        _apply(_diff(OLD, NEW), {"pkg/m.py": b"\x7fELF\0\0" + OLD})
    assert err.value.exit_code == 2
