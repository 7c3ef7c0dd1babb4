"""A committed lock stays put: resolve prefers the existing lock's pins (and files,
and hashes), ``--upgrade`` / ``--upgrade-package`` release them, ``--check`` says
whether the lock is what resolving would write. Real wheels (tests/helpers/
wheelkit.py) on a loopback simple index with PEP 658 METADATA and no sha256 on
its anchors (as PyTorch's nightly pages), so a lock's hashes come by download."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.lock import load_lock
from tests.helpers.wheelkit import build_wheel


class _Index:
    """The loopback index: ``add`` publishes a wheel, the pages follow."""

    def __init__(self, base: str, served, folder: Path) -> None:
        self.base, self.served, self.folder = base, served, folder
        self.projects: dict[str, list[str]] = {}

    def add(self, name: str, version: str, *requires: str) -> None:
        wheel = build_wheel(self.folder, name, version, {f"{name}/__init__.py": b""},
                            requires=requires)
        body = wheel.read_bytes()
        with zipfile.ZipFile(wheel) as zf:
            meta = zf.read(f"{name}-{version}.dist-info/METADATA")
        self.served.files[f"/files/{wheel.name}"] = body
        self.served.files[f"/files/{wheel.name}.metadata"] = meta
        self.projects.setdefault(name, []).append(
            f'<a href="/files/{wheel.name}" data-core-metadata="sha256='
            f'{hashlib.sha256(meta).hexdigest()}">{wheel.name}</a><br>')
        for project, anchors in self.projects.items():
            self.served.files[f"/simple/{project}/"] = (
                "<!DOCTYPE html><html><body>\n" + "\n".join(anchors) +
                "\n</body></html>\n").encode()

    def downloads(self) -> int:
        """GETs of whole wheels (hashing by download); METADATA is read apart."""
        return sum(1 for path, _ in self.served.requests if path.endswith(".whl"))


@pytest.fixture
def index(server, tmp_path, monkeypatch):
    base, served = server
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    made = _Index(base, served, tmp_path / "wheels")
    made.add("alpha", "1.0", "beta>=1.0")
    made.add("beta", "1.0")
    return made


def _profile(tmp_path: Path, index: _Index, *packages: str) -> Path:
    path = tmp_path / "small.toml"
    listed = ", ".join(f'"{p}"' for p in packages or ("alpha",))
    path.write_text(f'[[index]]\nname = "here"\nurl = "{index.base}/simple"\n'
                    f"[requirements]\npackages = [{listed}]\n")
    return path


def _resolve(profile: Path, out: Path, *args: str) -> int:
    return main(["resolve", str(profile), "-o", str(out), "--no-check", *args])


def _versions(lock: Path) -> dict[str, str]:
    return {p.name: str(p.entry.version) for p in load_lock(lock).packages}


def test_re_resolving_keeps_the_lock_byte_for_byte_until_told_to_upgrade(
        tmp_path, index, capsys, monkeypatch):
    profile, out = _profile(tmp_path, index), tmp_path / "pylock.small.toml"
    assert _resolve(profile, out) == 0
    locked = out.read_bytes()
    assert _versions(out) == {"alpha": "1.0", "beta": "1.0"}
    assert 'hash-source = "download"' in out.read_text()
    assert index.downloads() == 2
    # the index publishes newer releases; the lock holds, byte for byte, and
    # its hashes are not downloaded again (a fresh cache: nothing remembered)
    index.add("alpha", "1.1", "beta>=1.0")
    index.add("beta", "2.0")
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cold"))
    assert _resolve(profile, out) == 0
    assert out.read_bytes() == locked
    assert index.downloads() == 2
    capsys.readouterr()
    # --check agrees; it writes nothing either way
    assert _resolve(profile, out, "--check") == 0
    assert "is up to date" in capsys.readouterr().out
    # one project released: alpha moves, beta stays
    assert _resolve(profile, out, "--upgrade-package", "alpha") == 0
    assert _versions(out) == {"alpha": "1.1", "beta": "1.0"}
    assert _resolve(profile, out, "--upgrade") == 0
    assert _versions(out) == {"alpha": "1.1", "beta": "2.0"}


def test_a_locked_version_the_profile_no_longer_allows_moves(tmp_path, index,
                                                             capsys):
    profile, out = _profile(tmp_path, index), tmp_path / "pylock.small.toml"
    assert _resolve(profile, out) == 0
    index.add("beta", "2.0")
    before = out.read_bytes()
    _profile(tmp_path, index, "alpha", "beta>=2")
    capsys.readouterr()
    # --check: exit 1, the semantic diff (stacklock diff's renderer), no write
    assert _resolve(profile, out, "--check", "--refresh") == 1
    shown = capsys.readouterr().out
    assert "stacklock diff" in shown and "beta" in shown and "upgraded" in shown
    assert "1.0" in shown and "2.0" in shown
    assert f"{out} is not what resolving" in shown
    assert out.read_bytes() == before
    # resolving moves beta (and only beta), then --check passes
    assert _resolve(profile, out, "--refresh") == 0
    assert _versions(out) == {"alpha": "1.0", "beta": "2.0"}
    assert _resolve(profile, out, "--check") == 0


def test_check_without_a_lock_fails_and_writes_nothing(tmp_path, index, capsys):
    profile, out = _profile(tmp_path, index), tmp_path / "pylock.small.toml"
    assert _resolve(profile, out, "--locked") == 1
    assert "no lock there" in capsys.readouterr().out
    assert not out.exists()


def test_an_unchanged_run_is_replayed_and_check_uses_the_replay(
        tmp_path, index, capsys, monkeypatch):
    from stacklock.resolve import locking

    profile, out = _profile(tmp_path, index), tmp_path / "pylock.small.toml"
    assert _resolve(profile, out) == 0
    locked = out.read_bytes()

    def no_resolution(*args, **kwargs):
        raise AssertionError("resolved again")

    real = locking.lock_profile
    monkeypatch.setattr(locking, "lock_profile", no_resolution)
    assert _resolve(profile, out) == 0  # the lock it wrote: its record replays
    assert _resolve(profile, out, "--check") == 0
    assert out.read_bytes() == locked
    # another lock at the path is another starting point: not replayed
    out.write_bytes(locked.replace(b'"1.0"', b'"1.0" ', 1))
    with pytest.raises(AssertionError, match="resolved again"):
        _resolve(profile, out, "--check")
    # which resolves to the same packages: only the bytes differ, and --check
    # says so (exit 1: the file is not what resolve writes)
    monkeypatch.setattr(locking, "lock_profile", real)
    capsys.readouterr()
    assert _resolve(profile, out, "--check") == 1
    shown = capsys.readouterr().out
    assert "no differences" in shown and "differ only in what the diff" in shown
    assert _resolve(profile, out) == 0 and out.read_bytes() == locked


def test_a_bad_upgrade_package_or_an_unreadable_lock_is_one_line_exit_2(
        tmp_path, index, capsys):
    profile, out = _profile(tmp_path, index), tmp_path / "pylock.small.toml"
    assert _resolve(profile, out) == 0
    capsys.readouterr()
    assert _resolve(profile, out, "--upgrade-package", "alpah") == 2
    err = capsys.readouterr().err
    assert "--upgrade-package alpah: not in" in err and len(err.splitlines()) == 1
    out.write_text("not a lock\n")
    assert _resolve(profile, out) == 2
    err = capsys.readouterr().err
    assert str(out) in err and "--upgrade" in err and len(err.splitlines()) == 1
    assert out.read_text() == "not a lock\n"
    assert _resolve(profile, out, "--upgrade") == 0
    assert _versions(out) == {"alpha": "1.0", "beta": "1.0"}
