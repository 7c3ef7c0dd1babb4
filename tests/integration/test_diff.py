"""stacklock diff on real locks.

Inputs: uv's locks of the CUDA 12.8 and CUDA 13 stacks (tests/data/diff/, recorded by
scripts/record_diff_locks.py from real PyPI), stacklock's own committed locks
(locks/), real wheel entries from recorded index pages (PyPI, the sgl-kernel index),
and snapshots of real installed dist-info folders. Where a test edits a copy of a lock
to make a case the real files do not contain, its docstring says so. Expected values
are read from the input files themselves, not typed in.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from packaging.utils import canonicalize_name
from packaging.version import Version

from stacklock.cli import main
from stacklock.diff import (
    diff_lock_files,
    diff_locks,
    render_json,
    render_markdown,
    render_text,
)
from stacklock.diff.packages import compared_packages
from stacklock.errors import LockError
from stacklock.index.pages import parse_html_page
from stacklock.lock import parse_lock
from tests.helpers.data import DATA, SGL_PAGES, read_fixture
from tests.helpers.jsonout import parse_output

ROOT = Path(__file__).resolve().parents[2]
UV_128 = DATA / "diff" / "pylock.cu128.toml"
UV_130 = DATA / "diff" / "pylock.cu130.toml"
LOCK_128 = ROOT / "locks" / "pylock.blackwell-cu128.toml"
LOCK_130 = ROOT / "locks" / "pylock.pypi-cu130.toml"


def _read(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text("utf-8"))


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(tomlkit.dumps(data), "utf-8")
    return path


def _versions(path: Path) -> dict[str, str]:
    return {canonicalize_name(p["name"]): p["version"] for p in _read(path)["packages"]}


def _markers(path: Path) -> dict[str, str]:
    """Each package's marker as packaging prints it (the diff shows it so)."""
    from packaging.markers import Marker

    return {canonicalize_name(p["name"]): str(Marker(p["marker"]))
            for p in _read(path)["packages"] if "marker" in p}


def _package(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in data["packages"] if p["name"] == name)


def _links(page: Path, base_url: str) -> list[Any]:
    return list(parse_html_page(read_fixture(page), base_url).links)


def _wheel_entry(link: Any) -> dict[str, Any]:
    return {"url": link.url, "hashes": {"sha256": link.sha256}}


def _with_wheel(source: Path, name: str, version: str, link: Any) -> dict[str, Any]:
    """A copy of the uv lock ``source`` whose ``name`` entry is swapped for a real
    wheel from a recorded index page (as a lock resolved there would hold it)."""
    data = _read(source)
    entry = _package(data, name)
    entry["version"] = version
    entry.pop("sdist", None)
    entry["wheels"] = [_wheel_entry(link)]
    return data


def _by_name(diff: Any) -> dict[str, Any]:
    return {p.name: p for p in diff.packages}


# -- the 12.8 and 13 stacks, as uv locks them ------------------------------------


def test_uv_locks_12_8_to_13_match_the_files() -> None:
    old, new = _versions(UV_128), _versions(UV_130)
    diff = diff_lock_files(UV_128, UV_130)
    changes = _by_name(diff)

    assert {
        n for n, c in changes.items() if c.change == "removed"
    } == old.keys() - new.keys()
    assert {
        n for n, c in changes.items() if c.change == "added"
    } == new.keys() - old.keys()
    moved = {n for n in old.keys() & new.keys() if Version(old[n]) != Version(new[n])}
    assert {
        n for n, c in changes.items() if c.change in ("upgraded", "downgraded")
    } == moved
    for name in moved:
        want = "upgraded" if Version(new[name]) > Version(old[name]) else "downgraded"
        assert (changes[name].change, changes[name].old, changes[name].new) == (
            want,
            old[name],
            new[name],
        )
    # the CUDA 12 runtime wheels leave, their CUDA 13 successors arrive
    assert {n for n in old if n.startswith("nvidia-") and n.endswith("-cu12")} <= {
        n for n, c in changes.items() if c.change == "removed"
    }
    assert changes["torch"].change == "upgraded"
    summary = diff.summary()
    assert summary["unchanged"] == len(old.keys() & new.keys()) - len(moved)
    assert summary["old_packages"] == len(old) and summary["new_packages"] == len(new)
    assert not diff.warnings and summary["aspects"]["hash"] == 0
    assert any("no [tool.stacklock] table" in note for note in diff.notes)


def test_reversed_diff_mirrors_every_change() -> None:
    forward = _by_name(diff_lock_files(UV_128, UV_130))
    backward = _by_name(diff_lock_files(UV_130, UV_128))
    mirror = {
        "added": "removed",
        "removed": "added",
        "upgraded": "downgraded",
        "downgraded": "upgraded",
    }
    assert forward.keys() == backward.keys()
    for name, change in forward.items():
        back = backward[name]
        assert back.change == mirror[change.change]
        assert (back.old, back.new) == (change.new, change.old)


def test_identical_locks_differ_in_nothing() -> None:
    diff = diff_lock_files(UV_130, UV_130)
    assert not diff.differs and diff.packages == () and not diff.warnings
    assert diff.unchanged == len(_read(UV_130)["packages"])
    assert "no differences" in render_text(diff)


def test_cli_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(UV_128), str(UV_128), "--exit-code"]) == 0
    assert main(["diff", str(UV_128), str(UV_130), "--exit-code"]) == 1
    assert main(["diff", str(UV_128), str(UV_130)]) == 0
    out = capsys.readouterr().out
    assert "torch" in out and "upgraded" in out


def test_cli_json_is_stable_and_sorted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(UV_128), str(UV_130), "--format", "json"]) == 0
    first = capsys.readouterr().out
    assert main(["diff", str(UV_128), str(UV_130), "--format", "json"]) == 0
    assert capsys.readouterr().out == first
    data = parse_output(first, "diff")  # every key its schema's, none missing
    names = [p["name"] for p in data["packages"]]
    assert names == sorted(names)
    assert first == render_json(diff_lock_files(UV_128, UV_130))
    assert data["summary"]["differs"] is True


# -- stacklock's own locks --------------------------------------------------------


def test_stacklock_locks_12_8_to_13_toolkit_and_packages() -> None:
    old_cuda = _read(LOCK_128)["tool"]["stacklock"]["cuda"]
    new_cuda = _read(LOCK_130)["tool"]["stacklock"]["cuda"]
    diff = diff_lock_files(LOCK_128, LOCK_130)
    toolkit = {f.key: (f.old, f.new) for f in diff.toolkit}
    # the CUDA 12.8 runfile gives way to CUDA 13 toolkit wheels from PyPI: every
    # key that differs (or is on one side only) is a toolkit change, no other is
    assert (old_cuda["source"], new_cuda["source"]) == ("runfile", "pypi")
    changed = {k for k in old_cuda.keys() | new_cuda.keys()
               if old_cuda.get(k) != new_cuda.get(k)}
    assert {"version", "compat-floor", "runfile", "sha256", "allow-mixed"} <= changed
    assert toolkit == {k: (old_cuda.get(k), new_cuda.get(k)) for k in changed}
    assert [f.key for f in diff.toolkit][:3] == [
        "version",
        "min-driver",
        "compat-floor",
    ]
    stack = {f.key for f in diff.stack}
    assert {"profile", "profile-sha256", "requirements"} <= stack
    torch = _by_name(diff)["torch"]
    old_torch = _package(_read(LOCK_128), "torch")["tool"]["stacklock"]
    new_torch = _package(_read(LOCK_130), "torch")["tool"]["stacklock"]
    assert torch.change == "upgraded"
    assert torch.cuda == (old_torch["cuda"], new_torch["cuda"])
    # a new runfile was picked on purpose: no red flag for its new hash
    assert not diff.warnings

    text = render_text(diff)
    assert "toolkit and stack" in text and old_cuda["min-driver"] in text
    assert "nvidia-cutlass-dsl-libs-cu12" in text  # the reviewed CUDA 12 exception
    markdown = render_markdown(diff)
    assert (
        f"| `cuda.version` | {old_cuda['version']} | {new_cuda['version']} |"
        in markdown
    )
    toolkit_table = markdown.split("#### toolkit and stack")[1].split("####")[0]
    assert "`cuda.min-driver`" in toolkit_table and "`cuda.url`" not in toolkit_table
    # NVIDIA's table has no minimum driver for 13.0.3: unknown, never "(none)"
    assert "min-driver" not in new_cuda
    row = next(line for line in toolkit_table.splitlines()
               if line.startswith("| `cuda.min-driver`"))
    assert row.endswith("| unknown (see cuda.compat-floor) |"), row
    assert markdown.index("#### toolkit and stack") < markdown.index("#### packages")


def test_stacklock_lock_and_uv_lock_of_the_same_requirements() -> None:
    """Both resolved sglang 0.5.9 + torch 2.9.1 + sgl-kernel 0.3.21 + flashinfer
    0.6.3 from PyPI; what differs must be exactly what the files say differs, and
    every file both name must carry the same hash."""
    ours, theirs = _versions(LOCK_128), _versions(UV_128)
    diff = diff_lock_files(LOCK_128, UV_128)
    different = {n for n in ours.keys() & theirs.keys() if ours[n] != theirs[n]}
    marked = {n for n in ours.keys() & theirs.keys()
              if _markers(LOCK_128).get(n) != _markers(UV_128).get(n)}
    assert {p.name for p in diff.packages} == (
        different | marked | (ours.keys() ^ theirs.keys())
    )
    assert not diff.warnings and diff.summary()["aspects"]["index"] == 0
    # uv's lock has no [tool.stacklock]: PEP 751's own lock fields only
    from packaging.markers import Marker

    def fields(path: Path) -> dict[str, Any]:
        data = _read(path)
        out = {"requires-python": data.get("requires-python")}
        if data.get("environments"):
            out["environments"] = [str(Marker(m)) for m in data["environments"]]
        return out

    old, new = fields(LOCK_128), fields(UV_128)
    assert diff.toolkit == ()
    assert {f.key: (f.old, f.new) for f in diff.stack} == {
        key: (old.get(key), new.get(key)) for key in old.keys() | new.keys()
        if old.get(key) != new.get(key)}


def test_stacklock_lock_edited_stack_fields(tmp_path: Path) -> None:
    """Edited copy: an override added, the GPU arch list changed, a second index."""
    data = _read(LOCK_130)
    tool = data["tool"]["stacklock"]
    arch = tool["target"]["gpu-arch"]
    tool["overrides"] = ["torch>=2.11.0.dev0"]
    tool["target"]["gpu-arch"] = ["sm_120"]
    tool["indexes"] = [
        *tool["indexes"],
        {"name": "sgl-cu130", "url": "https://docs.sglang.io/whl/cu130"},
    ]
    diff = diff_lock_files(LOCK_130, _write(tmp_path / "pylock.edited.toml", data))
    stack = {f.key: (f.old, f.new) for f in diff.stack}
    assert stack["overrides"] == ([], ["torch>=2.11.0.dev0"])
    assert arch != ["sm_120"]
    assert stack["target.gpu-arch"] == (arch, ["sm_120"])
    assert len(stack["indexes"][1]) == 2
    assert diff.packages == () and diff.toolkit == ()
    assert "sgl-cu130=https://docs.sglang.io/whl/cu130" in render_text(diff, width=200)


def test_toolkit_runfile_hash_changed_under_same_name(tmp_path: Path) -> None:
    """Edited copy: the runfile keeps its name, its sha256 becomes another real
    runfile's (13.0.1's, from the shipped catalog): a red flag."""
    from stacklock.cuda.catalog import load_catalog

    other = load_catalog().get("13.0.1").runfile("linux-x86_64")
    assert other is not None and other.sha256
    data = _read(LOCK_128)
    assert data["tool"]["stacklock"]["cuda"]["sha256"] != other.sha256
    data["tool"]["stacklock"]["cuda"]["sha256"] = other.sha256
    diff = diff_lock_files(LOCK_128, _write(tmp_path / "pylock.edited.toml", data))
    assert [f.key for f in diff.toolkit] == ["sha256"]
    assert len(diff.warnings) == 1 and "same runfile name" in diff.warnings[0]


# -- rebuilt, moved index, changed hash: real wheel entries -----------------------


def test_rebuilt_local_label_from_the_sgl_kernel_index(tmp_path: Path) -> None:
    """sgl-kernel 0.3.21 from PyPI against 0.3.21+cu130 from sgl's own index."""
    links = _links(
        SGL_PAGES / "cu130" / "sgl-kernel" / "index.html",
        "https://docs.sglang.io/whl/cu130/sgl-kernel/",
    )
    link = next(
        x
        for x in links
        if x.filename == "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"
    )
    new = _write(
        tmp_path / "pylock.sgl.toml",
        _with_wheel(UV_130, "sgl-kernel", "0.3.21+cu130", link),
    )
    diff = diff_lock_files(UV_130, new)
    (change,) = diff.packages
    assert (change.name, change.change) == ("sgl-kernel", "rebuilt")
    assert change.detail == "local (none) -> cu130"
    assert change.index == ("pythonhosted.org", "github.com")


def test_rebuilt_build_tag_from_real_pypi_torch_wheels(tmp_path: Path) -> None:
    """PyPI has torch 2.10.0 for cp312 twice: untagged and with build tag 3."""
    links = _links(DATA / "pypi" / "torch.html", "https://pypi.org/simple/torch/")
    plain = next(
        x
        for x in links
        if x.filename == "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    )
    tagged = next(
        x
        for x in links
        if x.filename == "torch-2.10.0-3-cp312-cp312-manylinux_2_28_x86_64.whl"
    )
    old = _write(
        tmp_path / "pylock.old.toml", _with_wheel(UV_128, "torch", "2.10.0", plain)
    )
    new = _write(
        tmp_path / "pylock.new.toml", _with_wheel(UV_128, "torch", "2.10.0", tagged)
    )
    (change,) = diff_lock_files(old, new).packages
    assert (change.change, change.detail) == ("rebuilt", "build tag (none) -> 3")
    assert change.index is None and change.hash is None


def test_same_filename_new_hash_on_the_sgl_index_is_a_red_flag(tmp_path: Path) -> None:
    """sgl's cu130 page lists one filename with several sha256 values (re-uploads)."""
    links = _links(
        SGL_PAGES / "cu130" / "sgl-kernel" / "index.html",
        "https://docs.sglang.io/whl/cu130/sgl-kernel/",
    )
    name = "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"
    first, second = [x for x in links if x.filename == name][:2]
    assert first.sha256 != second.sha256
    old = _write(
        tmp_path / "pylock.a.toml",
        _with_wheel(UV_130, "sgl-kernel", "0.3.21+cu130", first),
    )
    new = _write(
        tmp_path / "pylock.b.toml",
        _with_wheel(UV_130, "sgl-kernel", "0.3.21+cu130", second),
    )
    diff = diff_lock_files(old, new)
    (change,) = diff.packages
    assert change.change == "hash-changed"
    assert change.hash == (name, f"sha256:{first.sha256}", f"sha256:{second.sha256}")
    (warning,) = diff.warnings
    assert name in warning and first.sha256[:12] in warning
    assert "> [!WARNING]" in render_markdown(diff)
    summary = parse_output(render_json(diff), "diff")["summary"]
    assert summary["changes"]["hash_changed"] == summary["aspects"]["hash"] == 1
    assert main(["diff", str(old), str(new), "--exit-code"]) == 1


def test_pypi_and_sgl_index_serve_one_filename_with_two_hashes(tmp_path: Path) -> None:
    """sgl-kernel 0.3.21's wheel name is the same on PyPI and on sgl's cu129 page,
    its bytes are not: an index move that is also a red flag."""
    pypi = _package(_read(UV_128), "sgl-kernel")["wheels"][0]
    links = _links(
        SGL_PAGES / "cu129" / "sgl-kernel" / "index.html",
        "https://docs.sglang.io/whl/cu129/sgl-kernel/",
    )
    name = pypi["url"].rsplit("/", 1)[1]
    link = next(x for x in links if x.filename == name)
    assert link.sha256 != pypi["hashes"]["sha256"]
    new = _write(
        tmp_path / "pylock.sgl.toml", _with_wheel(UV_128, "sgl-kernel", "0.3.21", link)
    )
    (change,) = diff_lock_files(UV_128, new).packages
    assert change.change == "moved-index"
    assert change.index == ("pythonhosted.org", "github.com")
    assert change.hash is not None and change.hash[0] == name


def test_moved_index_by_index_name(tmp_path: Path) -> None:
    """Edited copy: torch's entry says it came from another index (same file)."""
    data = _read(LOCK_130)
    torch = _package(data, "torch")
    torch["index"] = "https://download.pytorch.org/whl/cu130"
    torch["tool"]["stacklock"]["index-name"] = "pytorch-cu130"
    diff = diff_lock_files(LOCK_130, _write(tmp_path / "pylock.edited.toml", data))
    (change,) = diff.packages
    assert (change.change, change.index) == ("moved-index", ("pypi", "pytorch-cu130"))
    assert "pypi -> pytorch-cu130" in render_markdown(diff)


# -- snapshots --------------------------------------------------------------------


def _copy_env(venv: Path, names: tuple[str, ...]) -> Path:
    """A venv folder holding copies of the real dist-infos installed where the
    tests run (a venv or the interpreter's own site-packages)."""
    from importlib.metadata import distribution

    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = site / "site-packages"
    site.mkdir(parents=True)
    for name in names:
        dist = Path(str(distribution(name)._path))  # type: ignore[attr-defined]
        shutil.copytree(dist, site / dist.name)
    return site


def _snapshot(venv: Path, out: Path) -> Path:
    from stacklock.snapshot import write_snapshot

    return write_snapshot(venv, out)


def test_snapshot_against_itself_and_a_file_changed_in_place(tmp_path: Path) -> None:
    """Edited copy: after the first snapshot one line is appended to the copied
    RECORD of rich, as an in-place edit of an installed package would."""
    venv = tmp_path / "venv"
    site = _copy_env(venv, ("rich", "packaging"))
    first = _snapshot(venv, tmp_path / "pylock.first.toml")
    same = diff_lock_files(first, first)
    assert not same.differs and same.unchanged == 2
    (record,) = site.glob("rich-*.dist-info/RECORD")
    record.write_text(record.read_text() + "rich/extra.py,,\n")
    second = _snapshot(venv, tmp_path / "pylock.second.toml")
    diff = diff_lock_files(first, second)
    (change,) = diff.packages
    assert (change.name, change.change) == ("rich", "hash-changed")
    assert change.hash is not None and change.hash[0] == "RECORD"
    assert "changed in place" in diff.warnings[0]


def test_snapshot_against_a_lock_compares_versions_only_where_both_know(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    _copy_env(venv, ("rich", "packaging"))
    snap = _snapshot(venv, tmp_path / "pylock.snap.toml")
    diff = diff_lock_files(LOCK_128, snap)
    lock = _versions(LOCK_128)
    installed = _versions(snap)
    changes = _by_name(diff)
    for name, version in installed.items():
        if name in lock and lock[name] == version:
            assert name not in changes
        elif name in lock:
            assert changes[name].change in ("upgraded", "downgraded")
    assert any("snapshot" in note for note in diff.notes)
    # keys a snapshot does not record (profile, cuda runfile...) are not reported
    assert {f.key for f in diff.stack} <= {"requires-python"}


@pytest.mark.live
def test_live_uv_lock_installed_then_snapshotted_matches(tmp_path: Path) -> None:
    """uv locks two small packages from PyPI, installs the lock, stacklock snapshots
    the venv: the lock and the snapshot agree package by package."""
    uv = str(Path(sys.executable).with_name("uv"))
    (tmp_path / "req.in").write_text("six==1.17.0\nidna==3.10\n")
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    run = {"cwd": tmp_path, "check": True, "capture_output": True}
    subprocess.run(
        [
            uv,
            "pip",
            "compile",
            "--quiet",
            "--format",
            "pylock.toml",
            "--python-version",
            python,
            "req.in",
            "-o",
            "pylock.toml",
        ],
        **run,
    )
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, "venv"], **run)
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            "venv/bin/python",
            "-r",
            "pylock.toml",
        ],
        **run,
    )
    snap = _snapshot(tmp_path / "venv", tmp_path / "pylock.snap.toml")
    diff = diff_lock_files(tmp_path / "pylock.toml", snap)
    assert diff.packages == () and diff.unchanged == 2


# -- bad input --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b"lock-version = \n", "not valid TOML"),
        (b"\xff\xfe", "not valid TOML"),
        (b'[project]\nname = "x"\n', "lock-version"),
        (b'lock-version = "2.0"\ncreated-by = "x"\npackages = []\n', "lock-version"),
        (b'lock-version = "1.0"\ncreated-by = "x"\n', "packages"),
        (
            b'lock-version = "1.0"\ncreated-by = "x"\npackages = []\n'
            b"[tool.stacklock]\nlock-version = 99\n",
            "tool.stacklock.lock-version",
        ),
        (
            b'lock-version = "1.0"\ncreated-by = "x"\npackages = []\n'
            b'[tool]\nstacklock = "x"\n',
            "tool.stacklock",
        ),
    ],
)
def test_bad_input_is_one_line_naming_file_and_key(
    tmp_path: Path, content: bytes, where: str
) -> None:
    path = tmp_path / "pylock.bad.toml"
    path.write_bytes(content)
    with pytest.raises(LockError) as info:
        diff_lock_files(path, UV_128)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ") and where in message


def test_cli_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.toml"
    assert main(["diff", str(missing), str(UV_128)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(missing) in err
    assert main(["diff", str(UV_128), str(ROOT / "pyproject.toml")]) == 2
    assert "lock-version" in capsys.readouterr().err


def test_newer_minor_lock_version_reads_with_a_warning() -> None:
    content = UV_128.read_bytes().replace(
        b'lock-version = "1.0"', b'lock-version = "1.1"'
    )
    newer = parse_lock(content, path="pylock.newer.toml")
    diff = diff_locks(parse_lock(UV_128.read_bytes(), path=str(UV_128)), newer)
    assert not diff.packages
    assert any("lock-version 1.1" in w for w in diff.warnings)


def test_duplicate_names_are_keyed_by_marker() -> None:
    """Edited copy: uv writes one entry per marker when a name resolves twice."""
    data = _read(UV_128)
    torch = deepcopy(_package(data, "torch"))
    torch["marker"] = "sys_platform == 'darwin'"
    data["packages"].append(torch)
    _package(data, "torch")["marker"] = "sys_platform == 'linux'"
    lock = parse_lock(tomlkit.dumps(data).encode(), path="pylock.two.toml")
    assert {k for k in compared_packages(lock) if k.startswith("torch;")} == {
        'torch; sys_platform == "darwin"',
        'torch; sys_platform == "linux"',
    }


def test_renderers_on_the_uv_stacks() -> None:
    diff = diff_lock_files(UV_128, UV_130)
    markdown = render_markdown(diff)
    lines = markdown.splitlines()
    assert lines[0].startswith("### stacklock diff:")
    assert lines[2].startswith(f"**{len(diff.packages)} packages changed (")
    rows = [line for line in lines if line.startswith("| `")]
    assert len(rows) == len(diff.packages)
    # a long table folds so the PR comment stays short
    assert ("<details>" in markdown) == (len(rows) > 40)
    plain = render_text(diff)
    colored = render_text(diff, color=True)
    assert "\x1b[" in colored and "\x1b[" not in plain
    for change in diff.packages:
        assert change.name in plain
