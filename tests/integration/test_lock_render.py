"""render_lock writes every lock, snapshot and install copy: the committed locks
byte for byte; packages of every shape a lock holds (no/one/many dependencies,
cuda, no size or upload time, several wheels, values that need escaping, times
with and without microseconds) in exactly the layout tomlkit gives the same tables
(tomlkit is the oracle here, rendering the document on its own); and packages of
the shapes snapshots and other tools' locks hold (directory, vcs, archive, sdist,
markers) read back unchanged."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tomlkit
from packaging.markers import Marker
from packaging.pylock import (
    Package,
    PackageArchive,
    PackageDirectory,
    PackageSdist,
    PackageVcs,
    PackageWheel,
)
from packaging.utils import canonicalize_name
from packaging.version import Version

from stacklock.lock import Lock, LockedPackage, PackageTool, load_lock, parse_lock
from stacklock.lock.write import render_lock

LOCKS = sorted((Path(__file__).resolve().parents[2] / "locks").glob("pylock.*.toml"))


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_committed_locks_render_byte_for_byte(path: Path) -> None:
    assert render_lock(load_lock(path)) == path.read_text()


def _tomlkit_packages(text: str) -> str:
    """The ``[[packages]]`` part of ``text`` as tomlkit alone lays it out."""
    data = tomllib.loads(text)
    doc = tomlkit.document()
    packages = tomlkit.aot()
    for pkg in data["packages"]:
        table = tomlkit.table()
        for key in ("name", "version", "index"):
            table[key] = pkg[key]
        deps = tomlkit.array()
        for dep in pkg["dependencies"]:
            inline = tomlkit.inline_table()
            inline.update(dep)
            deps.append(inline)
        deps.multiline(len(pkg["dependencies"]) > 1)
        table["dependencies"] = deps
        wheels = tomlkit.aot()
        for wheel in pkg["wheels"]:
            wt = tomlkit.table()
            for key, value in wheel.items():
                if isinstance(value, dict):
                    inline = tomlkit.inline_table()
                    inline.update(value)
                    value = inline
                wt[key] = value
            wheels.append(wt)
        table["wheels"] = wheels
        tool = tomlkit.table(is_super_table=True)
        tool["stacklock"] = pkg["tool"]["stacklock"]
        table["tool"] = tool
        packages.append(table)
    doc["packages"] = packages
    return tomlkit.dumps(doc)


def _packages_part(text: str) -> str:
    return text[text.index("[[packages]]"):text.index("[tool.stacklock]")]


def _wheel(name: str, **kw: object) -> PackageWheel:
    base: dict[str, object] = {
        "name": name, "url": f"https://files.example.org/{name}",
        "hashes": {"sha256": "ab" * 32}}
    return PackageWheel(**{**base, **kw})  # type: ignore[arg-type]


def _package(name: str, version: str, index: str, wheels: list[PackageWheel],
             deps: tuple[str, ...] = (), **tool: str) -> LockedPackage:
    entry = Package(name=canonicalize_name(name), version=Version(version),
                    index=index, dependencies=[{"name": d} for d in deps],
                    wheels=wheels)
    return LockedPackage(entry=entry, tool=PackageTool(**tool))


def test_every_package_shape_renders_as_tomlkit_renders_it() -> None:
    lock = load_lock(LOCKS[0])
    odd = (
        _package("a", "1.0", "https://pypi.org/simple",
                 [_wheel("a-1.0-py3-none-any.whl")], index_name="pypi",
                 hash_source="index"),
        _package("b", "2.0+cu130", "https://x.example/whl",
                 [_wheel("b-2.0+cu130-py3-none-any.whl", size=12,
                         upload_time=datetime(2026, 2, 14, 8, 0, tzinfo=UTC))],
                 ("a",), index_name="nightly", cuda="13.0", hash_source="download"),
        _package("c", "3", 'https://h.example/"q"\\ü',
                 [_wheel("c-3-py3-none-any.whl", upload_time=datetime(
                     2026, 2, 14, 8, 0, 1, 5, tzinfo=UTC)),
                  _wheel("c-3-py2.py3-none-any.whl", size=0,
                         url="https://files.example.org/ü\tc.whl")],
                 ("a", "b"), index_name='quote"d', hash_source="index"),
    )
    text = render_lock(replace(lock, packages=odd))
    assert _packages_part(text) == _tomlkit_packages(text).rstrip("\n") + "\n\n"
    assert '"https://h.example/\\"q\\"\\\\ü"' in text  # escaped the tomlkit way
    again = parse_lock(text.encode(), path="pylock.odd.toml")
    assert again.packages == odd


def test_other_shapes_read_back_unchanged() -> None:
    hashes = {"sha256": "cd" * 32}
    shapes = (
        LockedPackage(entry=Package(
            name=canonicalize_name("d"), version=Version("1"),
            directory=PackageDirectory(path="/site/d-1.dist-info")),
            tool=PackageTool(record_sha256="ef" * 32, installer="pip",
                             origin="unknown")),
        LockedPackage(entry=Package(
            name=canonicalize_name("e"), marker=Marker("sys_platform == 'linux'"),
            vcs=PackageVcs(type="git", url="https://git.example/e",
                           commit_id="0" * 40))),
        LockedPackage(entry=Package(
            name=canonicalize_name("f"), version=Version("2"),
            archive=PackageArchive(url="https://x.example/f.zip", hashes=hashes))),
        LockedPackage(entry=Package(
            name=canonicalize_name("g"), version=Version("3"),
            sdist=PackageSdist(name="g-3.tar.gz", url="https://x.example/g-3.tar.gz",
                               hashes=hashes),
            wheels=[_wheel("g-3-py3-none-any.whl", path="wheels/g.whl")])),
    )
    lock = Lock(path="pylock.toml", lock_version=Version("1.0"), environments=(),
                requires_python=None, created_by="uv", packages=shapes)
    text = render_lock(lock)
    assert "[tool" not in text and not text.startswith("#")
    assert 'marker = "sys_platform == \'linux\'"' in text
    assert parse_lock(text.encode(), path="pylock.toml") == lock


def test_a_package_built_from_its_sdist_reads_back() -> None:
    sdist = PackageSdist(name="python-nvd3-0.16.0.tar.gz", size=34060,
                         url="https://files.example.org/python-nvd3-0.16.0.tar.gz",
                         hashes={"sha256": "ab" * 32})
    built = LockedPackage(
        entry=Package(name=canonicalize_name("python-nvd3"), version=Version("0.16.0"),
                      index="https://pypi.org/simple", dependencies=[], sdist=sdist),
        tool=PackageTool(index_name="pypi", hash_source="index",
                         build="python-nvd3 0.16.0 publishes no wheel, only an sdist"))
    lock = Lock(path="pylock.toml", lock_version=Version("1.0"), environments=(),
                requires_python=None, created_by="stacklock", packages=(built,))
    text = render_lock(lock)
    assert '[packages.sdist]\nname = "python-nvd3-0.16.0.tar.gz"\n' in text
    assert ('build = "python-nvd3 0.16.0 publishes no wheel, only an sdist"\n'
            in text)
    (again,) = parse_lock(text.encode(), path="pylock.toml").packages
    assert again == built and again.sdist == sdist and again.files == (sdist,)


def test_no_packages_is_an_empty_array() -> None:
    lock = replace(load_lock(LOCKS[0]), packages=())
    text = render_lock(lock)
    assert "packages = []\n" in text
    assert tomllib.loads(text)["packages"] == []
    assert parse_lock(text.encode(), path=lock.path).stack == lock.stack


def test_an_array_of_tables_in_tool_stacklock_is_one_per_line_from_two() -> None:
    """One index stays on the ``indexes`` line (as every committed lock has it);
    two or more go one per line, so that adding an index is a one-line diff."""
    from stacklock.lock import LockedIndex

    lock = load_lock(next(p for p in LOCKS if p.name == "pylock.pypi-small.toml"))
    assert lock.stack is not None
    pypi = '{name = "pypi", url = "https://pypi.org/simple"}'
    assert f"\nindexes = [{pypi}]\n" in render_lock(lock)
    two = replace(lock, stack=replace(lock.stack, indexes=(
        *lock.stack.indexes, LockedIndex(name="mirror", url="https://m.example/simple"))))
    text = render_lock(two)
    assert (f"\nindexes = [\n    {pypi},\n"
            '    {name = "mirror", url = "https://m.example/simple"},\n]\n') in text
    assert parse_lock(text.encode(), path="pylock.two.toml").stack == two.stack
