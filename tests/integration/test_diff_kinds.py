"""Each kind of change diff names, on edited copies of the committed pypi-small
lock (one field changed, as a hand edit or another writer would): the kinds the
real-lock tests do not reach (found by scripts/mutate.py's survivors)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomlkit

from stacklock.diff import diff_lock_files, diff_locks
from stacklock.lock import load_lock
from tests.helpers.data import ROOT

SMALL = ROOT / "locks" / "pylock.pypi-small.toml"


def _edited(tmp_path: Path, name: str, edit: Any) -> Path:
    data = tomlkit.parse(SMALL.read_text("utf-8"))
    entry = next(p for p in data["packages"] if p["name"] == "idna")
    edit(entry)
    out = tmp_path / name
    out.write_text(tomlkit.dumps(data), "utf-8")
    return out


def _one(old: Path, new: Path) -> dict[str, Any]:
    [change] = diff_lock_files(old, new).to_dict()["packages"]
    return change


def test_one_version_spelled_two_ways_is_no_change(tmp_path: Path) -> None:
    """3.20 and 3.20.0 are one version (PEP 440): neither an upgrade nor a
    downgrade."""
    spelled = _edited(tmp_path, "a.toml", lambda e: e.update(version="3.20.0"))
    assert load_lock(spelled).package("idna").version == load_lock(SMALL).package(
        "idna").version
    assert diff_lock_files(SMALL, spelled).packages == ()


def test_another_hash_of_one_file_by_another_algorithm(tmp_path: Path) -> None:
    """Locks that give a file only a sha512 (PEP 751 allows any algorithm):
    other bytes under the same name are still a changed hash."""
    def sha512(digest: str) -> Any:
        def edit(entry: Any) -> None:
            entry["wheels"][0]["hashes"] = {"sha512": digest}
        return edit

    old = _edited(tmp_path, "a.toml", sha512("ab" * 64))
    new = _edited(tmp_path, "b.toml", sha512("cd" * 64))
    change = _one(old, new)
    assert change["change"] == "hash_changed"
    assert change["hash"]["old"] == "sha512:" + "ab" * 64


def test_a_marker_added_says_from_none(tmp_path: Path) -> None:
    marked = _edited(tmp_path, "a.toml",
                     lambda e: e.update(marker="sys_platform == 'linux'"))
    change = _one(SMALL, marked)
    assert change["change"] == "marker_changed"
    assert change["detail"] == 'marker (none) -> sys_platform == "linux"'


def test_an_archive_of_other_bytes_is_replaced(tmp_path: Path) -> None:
    """A direct reference (an archive) is compared by its source, its hash:
    other bytes are 'replaced', naming both; the same bytes at another URL are
    no change."""
    def archive(url: str, sha: str) -> Any:
        def edit(entry: Any) -> None:
            del entry["wheels"]
            source = tomlkit.table()
            source["url"] = url
            source["hashes"] = {"sha256": sha}
            entry["archive"] = source
        return edit

    old = _edited(tmp_path, "a.toml", archive("https://a.example/idna.whl", "a" * 64))
    new = _edited(tmp_path, "b.toml", archive("https://a.example/idna.whl", "b" * 64))
    change = _one(old, new)
    assert change["change"] == "replaced"
    assert change["detail"] == f"sha256:{'a' * 64} -> sha256:{'b' * 64}"
    moved = _edited(tmp_path, "c.toml", archive("https://b.example/idna.whl",
                                                "a" * 64))
    assert diff_lock_files(old, moved).packages == ()


def test_an_added_or_removed_package_says_its_cuda(tmp_path: Path) -> None:
    """CUDA 12 wheels leave and CUDA 13 ones arrive between the committed
    blackwell-cu128 and pypi-cu130 locks: each says its side's CUDA."""
    old, new = (ROOT / "locks" / f"pylock.{n}.toml"
                for n in ("blackwell-cu128", "pypi-cu130"))
    cuda = {lock: {p.name: p.cuda for p in load_lock(lock).packages}
            for lock in (old, new)}
    diff = diff_locks(load_lock(old), load_lock(new))
    added = [c for c in diff.packages if c.change == "added" and cuda[new][c.name]]
    removed = [c for c in diff.packages
               if c.change == "removed" and cuda[old][c.name]]
    assert added and removed
    assert all(c.cuda == (None, cuda[new][c.name]) for c in added)
    assert all(c.cuda == (cuda[old][c.name], None) for c in removed)
    plain = [c for c in diff.packages if c.change == "added"
             and not cuda[new][c.name]]
    assert plain and all(c.cuda is None for c in plain)
    assert tomllib.loads(new.read_text())  # the committed lock itself is valid


def test_a_wheel_turned_archive_is_replaced(tmp_path: Path) -> None:
    """One side installs idna 3.20 from the index, the other from an archive
    (a direct reference): compared by source, whatever the versions say."""
    def archive(entry: Any) -> None:
        del entry["wheels"]
        source = tomlkit.table()
        source["url"] = "https://a.example/idna.whl"
        source["hashes"] = {"sha256": "a" * 64}
        entry["archive"] = source

    change = _one(SMALL, _edited(tmp_path, "a.toml", archive))
    assert change["change"] == "replaced"
    assert change["detail"] == f"3.20 -> sha256:{'a' * 64}"


def test_an_upgrade_between_snapshots_is_no_changed_record(tmp_path: Path) -> None:
    """Two snapshots of a venv whose rich was upgraded: its RECORD differs as any
    upgrade's does; that is the upgrade, not a hash changed in place."""
    import shutil
    import sys
    from importlib.metadata import distribution

    from stacklock.lock.write import dump_lock
    from stacklock.snapshot import make_snapshot

    site = tmp_path / "venv" / "lib" / (
        f"python{sys.version_info[0]}.{sys.version_info[1]}") / "site-packages"
    site.mkdir(parents=True)
    rich = Path(str(distribution("rich")._path))  # type: ignore[attr-defined]
    shutil.copytree(rich, site / rich.name)
    old = dump_lock(make_snapshot(tmp_path / "venv"), tmp_path / "old.toml")
    version = load_lock(old).package("rich").version
    text = old.read_text().replace(f'version = "{version}"',
                                   f'version = "{version}.post1"', 1)
    record = next(line for line in text.splitlines()
                  if line.startswith("record-sha256 = "))
    new = tmp_path / "new.toml"
    new.write_text(text.replace(record, f'record-sha256 = "{"0" * 64}"'))
    change = _one(old, new)
    assert (change["change"], change["hash"]) == ("upgraded", None)


def test_a_version_left_out_on_one_side_is_replaced(tmp_path: Path) -> None:
    """PEP 751 lets an entry leave its version out: against one that gives it,
    the package is replaced (there is no order to say up or down), both ways."""
    bare = _edited(tmp_path, "a.toml", lambda e: e.pop("version"))
    change = _one(SMALL, bare)
    assert (change["change"], change["old"], change["new"]) == ("replaced", "3.20",
                                                                None)
    assert _one(bare, SMALL)["change"] == "replaced"
