"""Direct references in a profile (``name @ URL``): locked exactly as PEP 751
``archive``, ``vcs`` and ``directory`` entries, or refused with one line.

The wheel by URL replays recorded real PyPI traffic
(tests/data/resolve/cassettes/direct-wheel/); git references are real
repositories made here with git and read through file:// URLs; source folders
and wheels are real files.
"""

from __future__ import annotations

import hashlib
import io
import struct
import tarfile
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest
from packaging.pylock import Pylock

from stacklock.errors import MetadataError, ProfileError, ResolutionError
from stacklock.http import make_http_client
from stacklock.lock import load_lock
from stacklock.resolve.locking import lock_profile, render_resolve
from tests.helpers.cassette import ReplayTransport
from tests.helpers.gitrepo import make_repo
from tests.helpers.wheelkit import build_wheel

DATA = Path(__file__).resolve().parents[1] / "data" / "resolve"
CASSETTES = DATA / "cassettes"
SIX_URL = ("https://files.pythonhosted.org/packages/d9/5a/e7c31adbe875f2abbb91bd84cf2"
           "dc52d792b5a01506781dbcf25c91daf11/six-1.16.0-py2.py3-none-any.whl")
SIX_SHA = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
def _profile(folder: Path, packages: list[str], extra: str = "") -> Path:
    path = folder / "direct.toml"
    quoted = ", ".join(f'"{p}"' for p in packages)
    path.write_text(f'[profile]\ndescription = "direct"\n[target]\npython = "3.12"\n'
                    f"[requirements]\npackages = [{quoted}]\n{extra}")
    return path


def _lock(profile: Path, tmp_path: Path):
    out = tmp_path / "locks" / "pylock.direct.toml"
    with make_http_client(transport=ReplayTransport(CASSETTES / "direct-wheel")) \
            as http:
        result = lock_profile(str(profile), output=out, http=http,
                              cache_dir=tmp_path / "cache", check=False)
    data = tomllib.loads(out.read_text())
    Pylock.from_dict(data)  # packaging accepts it
    load_lock(out)  # and so does stacklock's strict reader
    packages = {p["name"]: p for p in data["packages"]}
    return result, packages, out


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """tests/helpers/gitrepo.py's repository: (path, commit of v0.1.0, commit of
    main)."""
    path = tmp_path / "demo"
    first, head = make_repo(path)
    return path, first, head


def test_a_wheel_by_url_is_locked_as_an_archive_and_beats_the_index(tmp_path):
    profile = DATA / "cases" / "direct-wheel.toml"
    result, packages, _ = _lock(profile, tmp_path)
    six = packages["six"]
    # PyPI has six 1.17.0; the direct reference is what is locked
    assert six["version"] == "1.16.0" and "index" not in six
    assert six["archive"] == {"url": SIX_URL, "size": 11053,
                              "hashes": {"sha256": SIX_SHA}}
    assert "wheels" not in six
    dateutil = packages["python-dateutil"]
    assert dateutil["dependencies"] == [{"name": "six"}]
    assert result.resolution.pins() == {"python-dateutil": "2.9.0.post0",
                                        "six": "1.16.0"}


@pytest.mark.parametrize("revision", ["v0.1.0", "first-full", "first-short"])
def test_a_git_reference_is_locked_at_the_commit_its_revision_names(
        tmp_path, repo, revision):
    path, first, _ = repo
    rev = {"v0.1.0": "v0.1.0", "first-full": first, "first-short": first[:9]}[revision]
    profile = _profile(tmp_path, [f"demo-direct @ git+{path.as_uri()}@{rev}",
                                  f"six @ {SIX_URL}"])
    result, packages, _ = _lock(profile, tmp_path)
    demo = packages["demo-direct"]
    assert demo["vcs"] == {"type": "git", "url": path.as_uri(),
                           "requested-revision": rev, "commit-id": first}
    # a source tree: PEP 751 records no version; its requirements are resolved
    assert "version" not in demo and demo["dependencies"] == [{"name": "six"}]
    assert result.resolution.pins()["demo-direct"] == "0.1.0"
    assert (f"direct reference: demo-direct @ git+{path.as_uri()}@{rev} -> "
            f"demo-direct 0.1.0 (commit {first})") in render_resolve(result)


def test_a_git_branch_is_locked_at_its_head_and_a_missing_one_is_refused(
        tmp_path, repo):
    path, _, head = repo
    profile = _profile(tmp_path, [f"demo-direct @ git+{path.as_uri()}@main",
                                  f"six @ {SIX_URL}"])
    result, packages, _ = _lock(profile, tmp_path)
    assert packages["demo-direct"]["vcs"]["commit-id"] == head
    assert result.resolution.pins()["demo-direct"] == "0.2.0"
    missing = _profile(tmp_path, [f"demo-direct @ git+{path.as_uri()}@v9"])
    with pytest.raises(ProfileError) as err:
        _lock(missing, tmp_path)
    assert f"no branch or tag 'v9' in {path.as_uri()}" in str(err.value)
    assert str(missing) in str(err.value) and "\n" not in str(err.value)


def test_a_source_folder_is_locked_as_a_directory_relative_to_the_lock(
        tmp_path, repo):
    path, _, _ = repo
    profile = _profile(tmp_path, ["demo-direct @ ./demo", f"six @ {SIX_URL}"])
    result, packages, out = _lock(profile, tmp_path)
    assert packages["demo-direct"]["directory"] == {"path": "../demo",
                                                     "editable": False}
    assert (out.parent / "../demo").resolve() == path.resolve()
    assert result.resolution.pins()["demo-direct"] == "0.2.0"


def test_a_local_wheel_is_an_archive_with_its_path_and_sha256(tmp_path):
    wheel = build_wheel(tmp_path / "dist", "local-pkg", "1.0",
                        {"local_pkg/__init__.py": b""})
    profile = _profile(tmp_path, [f"local-pkg @ {wheel.as_uri()}"])
    _, packages, _ = _lock(profile, tmp_path)
    archive = packages["local-pkg"]["archive"]
    assert archive["path"] == "../dist/local_pkg-1.0-py3-none-any.whl"
    assert archive["hashes"]["sha256"] == hashlib.sha256(
        wheel.read_bytes()).hexdigest()


@pytest.mark.parametrize(("package", "extra", "expected"), [
    ("demo @ hg+https://example.org/demo@1", "",
     "hg repositories are not supported, only git"),
    ("demo @ ./nothing-here", "", "nothing-here does not exist"),
    ("demo @ https://example.org/demo.egg", "",
     "demo.egg is neither a wheel nor an sdist"),
    ("six", 'overrides = ["six @ https://example.org/six-1.16.0-py3-none-any.whl"]',
     "a direct reference in overrides is not supported"),
    ("numpy @ https://example.org/numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl",
     "", "no tag of the wheel (cp311-cp311-manylinux_2_17_x86_64) fits the target"),
    ("demo @ https://example.org/demo-1.0.tar.gz", "no-build = true",
     "an sdist, which install builds, and no-build refuses building demo"),
])
def test_what_cannot_be_locked_exactly_is_one_line_naming_it(
        tmp_path, package, extra, expected):
    profile = _profile(tmp_path, [package], extra)
    with pytest.raises(ProfileError) as err:
        _lock(profile, tmp_path)
    text = str(err.value)
    assert expected in text and str(profile) in text and "\n" not in text
    assert err.value.exit_code == 2
    assert not (tmp_path / "locks").exists()


def test_a_reference_whose_artifact_is_another_project_is_refused(tmp_path):
    wheel = build_wheel(tmp_path / "dist", "local-pkg", "1.0", {})
    profile = _profile(tmp_path, [f"other-pkg @ {wheel.as_uri()}"])
    with pytest.raises(ProfileError) as err:
        _lock(profile, tmp_path)
    assert "the artifact is local-pkg 1.0, not other-pkg" in str(err.value)


def test_a_dependency_s_direct_reference_is_refused_unless_the_profile_names_it(
        tmp_path):
    """A wheel whose METADATA requires ``six @ URL``: that reference is locked
    only when the profile names the same one, never dropped."""
    wheel = build_wheel(tmp_path / "wheels", "needs-six", "1.0", {},
                        requires=(f"six @ {SIX_URL}",))
    needs = f"needs-six @ {wheel.as_uri()}"
    profile = _profile(tmp_path, [needs])
    with pytest.raises(ResolutionError) as err:
        _lock(profile, tmp_path)
    assert f"needs-six 1.0 requires six @ {SIX_URL}: a direct reference in a " \
           "dependency's metadata" in str(err.value)
    named = _profile(tmp_path, [needs, f"six @ {SIX_URL}"])
    result, packages, _ = _lock(named, tmp_path)
    assert packages["six"]["archive"]["url"] == SIX_URL
    assert result.resolution.pins() == {"needs-six": "1.0", "six": "1.16.0"}


def test_a_direct_reference_is_never_replayed_from_the_memo(tmp_path, repo):
    """A branch moves without any index page changing: such a profile is
    resolved again every time."""
    from stacklock.profile import load_profile
    from stacklock.resolve.memo import memo_key

    path, _, _ = repo
    profile = _profile(tmp_path, [f"demo-direct @ git+{path.as_uri()}@main"])
    assert memo_key(load_profile(str(profile)), output=tmp_path / "x.toml",
                    check=True) is None


def test_a_requirement_the_direct_reference_does_not_meet_is_a_conflict(tmp_path):
    profile = _profile(tmp_path, [f"six @ {SIX_URL}", "six<1.10"])
    with pytest.raises(ResolutionError) as err:
        _lock(profile, tmp_path)
    text = str(err.value)
    assert "the profile requires six<1.10" in text
    assert f"six comes only from the profile's direct reference six @ {SIX_URL} " \
           "(version 1.16.0)" in text


def test_an_sdist_with_static_pkg_info_is_an_archive_that_install_builds(tmp_path):
    """PEP 643: Metadata-Version 2.2 and no Dynamic field the resolver reads, so
    its PKG-INFO is the built wheel's metadata and nothing is built to lock it."""
    sdist = tmp_path / "dist" / "demo_sdist-1.0.tar.gz"
    sdist.parent.mkdir()
    pkg_info = (b"Metadata-Version: 2.2\nName: demo-sdist\nVersion: 1.0\n"
                b"Requires-Dist: six>=1.5\n")
    with tarfile.open(sdist, "w:gz") as archive:
        info = tarfile.TarInfo("demo_sdist-1.0/PKG-INFO")
        info.size = len(pkg_info)
        archive.addfile(info, io.BytesIO(pkg_info))
    profile = _profile(tmp_path, ["demo-sdist @ ./dist/demo_sdist-1.0.tar.gz",
                                  f"six @ {SIX_URL}"])
    _, packages, _ = _lock(profile, tmp_path)
    demo = packages["demo-sdist"]
    assert demo["version"] == "1.0" and demo["dependencies"] == [{"name": "six"}]
    assert demo["archive"]["path"] == "../dist/demo_sdist-1.0.tar.gz"
    assert demo["archive"]["hashes"]["sha256"] == hashlib.sha256(
        sdist.read_bytes()).hexdigest()
    assert demo["tool"]["stacklock"]["build"] == \
        "demo-sdist is a direct reference to an sdist"
    assert not list((tmp_path / "cache").rglob("build-*.log"))  # nothing built


def test_uv_installs_a_lock_with_a_local_wheel_archive_offline(tmp_path):
    from tests.helpers.uv import uv_dry_run

    wheel = build_wheel(tmp_path / "dist", "local-pkg", "1.0",
                        {"local_pkg/__init__.py": b""})
    profile = _profile(tmp_path, [f"local-pkg @ {wheel.as_uri()}"])
    _, _, out = _lock(profile, tmp_path)
    # uv finds the wheel by the archive's path, relative to the lock
    assert f"local-pkg @ {wheel.as_uri()}" in uv_dry_run(out, tmp_path, offline=True)


def _no_network(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"--offline asked the network: {request.url}")


def test_offline_uses_what_an_earlier_run_stored_and_names_what_it_cannot(
        tmp_path, repo):
    path, first, _ = repo
    pinned = f"demo-direct @ git+{path.as_uri()}@{first}"
    profile = _profile(tmp_path, [pinned, f"six @ {SIX_URL}"])
    _, online, _ = _lock(profile, tmp_path)  # fills the cache
    out = tmp_path / "offline" / "pylock.direct.toml"
    with make_http_client(transport=httpx.MockTransport(_no_network)) as http:
        lock_profile(str(profile), output=out, http=http, offline=True,
                     cache_dir=tmp_path / "cache", check=False)
        assert {p["name"]: p for p in tomllib.loads(out.read_text())["packages"]} \
            == online
        tagged = _profile(tmp_path, [f"demo-direct @ git+{path.as_uri()}@v0.1.0"])
        with pytest.raises(ProfileError) as err:
            lock_profile(str(tagged), output=out, http=http, offline=True,
                         cache_dir=tmp_path / "cache", check=False)
        assert "--offline cannot ask the repository which commit" in str(err.value)
        fresh = _profile(tmp_path, [f"six @ {SIX_URL}"])
        with pytest.raises(ProfileError) as err:
            lock_profile(str(fresh), output=out, http=http, offline=True,
                         cache_dir=tmp_path / "empty-cache", check=False)
        assert f"six @ {SIX_URL}: not in the cache, and --offline" in str(err.value)


def _broken_wheel(folder: Path) -> Path:
    """A real wheel whose METADATA member is not deflate: its first block
    header names the reserved block type."""
    stored = build_wheel(folder / "stored", "broken-pkg", "1.0",
                         {"broken_pkg/__init__.py": b""})
    wheel = folder / stored.name
    with zipfile.ZipFile(stored) as source, \
            zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as deflated:
        for member in source.infolist():
            deflated.writestr(member.filename, source.read(member))
    body = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("broken_pkg-1.0.dist-info/METADATA")
    name_len, extra_len = struct.unpack_from("<HH", body, info.header_offset + 26)
    body[info.header_offset + 30 + name_len + extra_len] = 0xFF  # BTYPE 11
    wheel.write_bytes(bytes(body))
    return wheel


def _cut_sdist(folder: Path) -> Path:
    """A real .tar.gz sdist cut in half: its gzip stream ends early."""
    sdist = folder / "cut_sdist-1.0.tar.gz"
    folder.mkdir(parents=True, exist_ok=True)
    blob = bytes(range(256)) * 800
    with tarfile.open(sdist, "w:gz") as archive:
        for name, data in (("cut_sdist-1.0/blob", blob),
                           ("cut_sdist-1.0/PKG-INFO",
                            b"Metadata-Version: 2.2\nName: cut-sdist\nVersion: 1.0\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    sdist.write_bytes(sdist.read_bytes()[:sdist.stat().st_size // 2])
    return sdist


@pytest.mark.parametrize("make", [_broken_wheel, _cut_sdist])
def test_a_broken_archive_is_one_line_naming_the_reference(tmp_path, make):
    """zipfile and tarfile pass on zlib's error and EOFError, neither an
    OSError: each was a traceback before."""
    archive = make(tmp_path / "dist")
    name = archive.name.split("-")[0].replace("_", "-")
    profile = _profile(tmp_path, [f"{name} @ {archive.as_uri()}"])
    with pytest.raises(MetadataError) as err:
        _lock(profile, tmp_path)
    text = str(err.value)
    assert f"{name} @ {archive.as_uri()}: not a readable archive" in text
    assert "\n" not in text and err.value.exit_code == 2
    assert not (tmp_path / "locks").exists()
