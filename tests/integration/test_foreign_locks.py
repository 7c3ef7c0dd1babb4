"""Locks other tools wrote: install plans what ``Pylock.select()`` selects.

Inputs: the real locks of tests/data/foreign-locks/ (uv, pip, pdm, pex; see its
PROVENANCE.md) and ``expected-select.json`` there, recorded from packaging alone by
scripts/record_foreign_expectations.py for CPython 3.12 and 3.13. The host's
answer is asked of packaging here, at the host's own markers and tags.
"""

from __future__ import annotations

import itertools
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from packaging.markers import default_environment
from packaging.pylock import (
    PackageDirectory,
    Pylock,
    PylockSelectError,
    PylockValidationError,
)
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name

from scripts.record_foreign_expectations import source_of
from stacklock.cli import main
from stacklock.diff import diff_lock_files
from stacklock.errors import LockError, PreflightError, StacklockError
from stacklock.install.run import install_lock
from stacklock.install.selection import Wanted, select_packages
from stacklock.lock import load_lock
from tests.helpers.data import DATA
from tests.helpers.interpreters import target_interpreter
from tests.helpers.jsonout import parse_output
from tests.helpers.projects import commit_all, make_project
from tests.helpers.wheelkit import build_wheel, sha256

CORPUS = DATA / "foreign-locks"
LOCKS = sorted(CORPUS.glob("*.toml"))
EXPECTED = json.loads((CORPUS / "expected-select.json").read_text("utf-8"))
PY = sys.executable
# What stacklock refuses although select() would pick it, each for one reason it
# names: a file whose only hash uv does not check.
NOT_HASH_CHECKED = {"pip-lazy-beancount.toml": "no sha256 hash (found: sha1)"}


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))


def _source(source: object, lock: Path) -> str:
    """A selected source as the recording script words it, a directory made
    absolute (the plan names it so)."""
    text = source_of(source)
    if isinstance(source, PackageDirectory):
        return f"directory {(lock.parent / source.path).resolve()}"
    return text


def _reference(lock: Path) -> dict[str, str] | str:
    """What packaging selects at this host, or why it refuses."""
    try:
        pylock = Pylock.from_dict(tomllib.loads(lock.read_text("utf-8")))
        chosen = pylock.select(environment=default_environment(),  # type: ignore[arg-type]
                               tags=list(sys_tags()))
        return {str(p.name): _source(s, lock) for p, s in chosen}
    except (PylockValidationError, PylockSelectError) as exc:
        return str(exc)


def _planned(plan: dict[str, Any], lock: Path) -> dict[str, str]:
    """The dry-run JSON's choice per package, in the reference's words."""
    out = {}
    for package, download in zip(plan["packages"], plan["downloads"], strict=True):
        kind = download["kind"]
        text = download["filename"]
        if kind == "vcs":
            text = "vcs " + download["url"].split("+", 1)[1]
        elif kind in ("directory", "archive"):
            text = f"{kind} {download['filename' if kind == 'directory' else 'url']}"
        out[package["name"]] = text
    return out


@pytest.mark.parametrize("lock", LOCKS, ids=[p.name for p in LOCKS])
def test_dry_run_chooses_what_select_chooses_on_this_host(
        lock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["install", str(lock), "--dry-run", "--json", "--allow-no-gpu",
            "--venv", str(tmp_path / "env"), "--python", PY]
    rc = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    reference = _reference(lock)
    if isinstance(reference, str) or lock.name in NOT_HASH_CHECKED:
        assert rc == 2
        assert err.startswith("stacklock: error: ") and err.count("\n") <= 2
        why = NOT_HASH_CHECKED.get(lock.name)
        if why is not None and not isinstance(reference, str):
            assert why in err
        return
    assert rc == 0, err
    assert _planned(parse_output(out)["plan"], lock) == reference


@pytest.mark.parametrize("python", ["3.12", "3.13"])
@pytest.mark.parametrize("lock", LOCKS, ids=[p.name for p in LOCKS])
def test_plan_for_312_and_313_is_the_recorded_select(lock: Path, python: str) -> None:
    expected = EXPECTED[lock.name][python]
    if "invalid" in expected:
        with pytest.raises(LockError, match="not a PEP 751 lock"):
            load_lock(lock)
        return
    interp = target_interpreter(python)
    loaded = load_lock(lock)
    if "refused" in expected:
        with pytest.raises((LockError, PreflightError)):
            from stacklock.install.preflight import check_lock_fits

            check_lock_fits(loaded, interp)
            select_packages(loaded, interp)
        return
    chosen = {str(s.package.name): _source(s.source, lock)
              for s in select_packages(loaded, interp)}
    recorded = {name: (f"directory {(lock.parent / text[10:]).resolve()}"
                       if text.startswith("directory ") else text)
                for name, text in expected["selected"].items()}
    assert chosen == recorded


@pytest.mark.parametrize("lock", LOCKS, ids=[p.name for p in LOCKS])
def test_diff_of_a_lock_with_itself_is_empty(
        lock: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["diff", str(lock), str(lock), "--exit-code"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if "invalid" in EXPECTED[lock.name]["3.12"]:
        assert rc == 2 and err.startswith("stacklock: error: ")
        return
    assert (rc, err) == (0, "")
    assert "no differences" in out


def test_pdm_groups_and_extras_choose_as_select_does(tmp_path: Path) -> None:
    """pdm marks packages ``"test" in dependency_groups``: the default groups
    install without them, ``--group test`` adds them (and uv is told so), an
    undeclared group is one line."""
    lock = CORPUS / "pdm-ldlite.toml"
    interp = target_interpreter("3.12")
    loaded = load_lock(lock)
    default = {s.package.name for s in select_packages(loaded, interp)}
    tested = {s.package.name for s in select_packages(loaded, interp,
                                                     groups=("default", "test"))}
    assert default < tested
    pylock = Pylock.from_dict(tomllib.loads(lock.read_text("utf-8")))
    env = interp.marker_env
    assert tested == {p.name for p, _ in pylock.select(
        environment=env, tags=interp.tags,  # type: ignore[arg-type]
        dependency_groups=("default", "test"))}
    result = install_lock(lock, venv=tmp_path / "env", python=PY, dry_run=True,
                          wanted=Wanted(groups=("default", "test")))
    sync = result.plan.commands[1]
    assert sync[sync.index("--group"):][:4] == ("--group", "default", "--group",
                                                "test")
    with pytest.raises(LockError, match="Undeclared dependency groups: nope"):
        install_lock(lock, venv=tmp_path / "env", python=PY, dry_run=True,
                     wanted=Wanted(groups=("nope",)))


def test_a_gpu_lock_without_stacklock_tables_gets_its_cuda_inferred(
        tmp_path: Path) -> None:
    """uv's lock of torch with ``nvidia-*-cu13`` wheels: the driver check is
    made for what it holds, and the note says what was inferred."""
    result = install_lock(CORPUS / "uv-maia3.toml", venv=tmp_path / "env",
                          python=PY, dry_run=True, allow_no_gpu=True)
    (inferred,) = [n for n in result.notes if n.startswith("no [tool.stacklock]")]
    assert "CUDA 13" in inferred and "nvidia-cudnn-cu13" in inferred


def test_vcs_and_directory_entries_install_for_real(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock as pip writes one for a git dependency (url + commit, no version),
    a project folder next to the lock and an archive (relative paths): uv builds
    the first two, the commit pinned, and checks the archive's sha256, with
    nothing from the network; the plan says it drops ``--require-hashes`` (PEP
    751 gives vcs and directory no hash). The archive's bytes changed: refused."""
    monkeypatch.setenv("UV_OFFLINE", "1")
    repo = make_project(tmp_path / "repo", "fromgit", "1.0", "git")
    commit = commit_all(repo)
    (repo / "fromgit" / "__init__.py").write_text("VALUE = 'later'\n")
    commit_all(repo)  # a newer commit: the locked one must win
    make_project(tmp_path / "app" / "local", "fromdir", "2.0", "dir")
    wheel = build_wheel(tmp_path / "app" / "dist", "fromzip", "3.0",
                        {"fromzip/__init__.py": b"VALUE = 'zip'\n"})
    lock = tmp_path / "app" / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "pip"\n\n'
        '[[packages]]\nname = "fromgit"\n'
        f'vcs = {{ type = "git", url = "{repo.as_uri()}", commit-id = "{commit}" }}\n'
        '\n[[packages]]\nname = "fromdir"\n'
        'directory = { path = "local", editable = false }\n'
        '\n[[packages]]\nname = "fromzip"\nversion = "3.0"\n'
        f'archive = {{ path = "dist/{wheel.name}", hashes = {{ sha256 = '
        f'"{sha256(wheel)}" }} }}\n'
        '\n[[packages]]\nname = "onwindows"\nmarker = "sys_platform == \'win32\'"\n'
        'directory = { path = "nowhere" }\n')
    result = install_lock(lock, venv=tmp_path / "env", python=PY, allow_no_gpu=True,
                          report_dir=tmp_path / "report")
    assert "--require-hashes" not in result.plan.commands[1]
    assert result.validation is not None, result.notes
    checks = {c.name: c.status for c in result.validation.all_checks}
    assert checks["distributions"] == "pass", result.validation.to_dict()
    assert [d.kind for d in result.plan.downloads] == ["vcs", "directory", "archive"]
    assert any(n.startswith("no hash in PEP 751 for fromdir (directory), fromgit (vcs)")
               for n in result.notes)
    import subprocess

    shown = subprocess.run(
        [str(tmp_path / "env" / "bin" / "python"), "-c",
         "import fromgit, fromdir, fromzip; "
         "print(fromgit.VALUE, fromdir.VALUE, fromzip.VALUE)"],
        check=True, capture_output=True, text=True).stdout.split()
    assert shown == ["git", "dir", "zip"]
    # validate on its own holds the venv to what the markers pick here, too
    from stacklock.validate.run import validate

    alone = validate(load_lock(lock), venv=tmp_path / "env", gate=False,
                     probes=False, allow_no_gpu=True)
    (dists,) = [c for c in alone.all_checks if c.name == "distributions"]
    assert dists.status == "pass", dists.reason
    every = validate(load_lock(lock), venv=tmp_path / "env", gate=False,
                     probes=False, allow_no_gpu=True, by_markers=False)
    (dists,) = [c for c in every.all_checks if c.name == "distributions"]
    assert (dists.status, dists.reason) == ("fail", "1 missing (onwindows)")
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # not the locked bytes any more
    with pytest.raises(StacklockError, match="fromzip"):
        install_lock(lock, venv=tmp_path / "env", python=PY, validate=False,
                     reinstall=True)


HISTORY = [
    [*sorted((CORPUS / "history").glob("pip-lazy-beancount-*.toml")),
     CORPUS / "pip-lazy-beancount.toml"],
    [*sorted((CORPUS / "history").glob("pdm-h11-*.toml")), CORPUS / "pdm-h11.toml"],
]
STEPS = [pair for versions in HISTORY for pair in itertools.pairwise(versions)]


def _identity(package: dict[str, Any]) -> tuple[object, ...]:
    """What installs, read from the TOML alone: the vcs url and commit, the
    directory, the archive's hashes, else the version and each file's hashes;
    and the marker."""
    if "vcs" in package:
        source: object = (package["vcs"].get("url"), package["vcs"]["commit-id"])
    elif "directory" in package:
        source = package["directory"]["path"]
    elif "archive" in package:
        source = sorted(package["archive"]["hashes"].items())
    else:
        files = [*package.get("wheels", []), *([package["sdist"]]
                                               if "sdist" in package else [])]
        source = (package.get("version"), sorted(
            (f.get("name") or (f.get("url") or f["path"]).rsplit("/", 1)[-1],
             f["hashes"].get("sha256")) for f in files))
    return source, " ".join(str(package.get("marker", "")).split())


@pytest.mark.parametrize(("old", "new"), STEPS,
                         ids=[f"{o.stem}->{n.stem}" for o, n in STEPS])
def test_diff_of_consecutive_real_versions_matches_a_reference(
        old: Path, new: Path) -> None:
    """pip writes a vcs entry without a version; it is compared by url and
    commit. The reference keys each lock's packages by name (no name repeats in
    these files) and compares what installs, straight from the TOML."""
    before, after = ({canonicalize_name(p["name"]): _identity(p)
                      for p in tomllib.loads(path.read_text("utf-8"))["packages"]}
                     for path in (old, new))
    changed = {n for n in before.keys() | after.keys()
               if before.get(n) != after.get(n)}
    diff = diff_lock_files(old, new)
    assert {p.name for p in diff.packages} == changed
    vcs = {canonicalize_name(p["name"]) for p in tomllib.loads(
        new.read_text("utf-8"))["packages"] if "vcs" in p}
    for change in diff.packages:
        if change.name in vcs and change.old is not None:  # by commit
            assert change.change == "replaced" and "@" in (change.detail or "")


def test_a_rebuild_across_markers_is_one_change(tmp_path: Path) -> None:
    """Edited copy of uv's CUDA 12.8 lock (the case the real files lack): torch
    listed twice, ``+cpu`` under two markers, against the one ``+cu128`` entry."""
    data = tomllib.loads((DATA / "diff" / "pylock.cu128.toml").read_text("utf-8"))
    (torch,) = [p for p in data["packages"] if p["name"] == "torch"]
    wheels = [dict(w, name=w["url"].rsplit("/", 1)[-1].replace(
        f"-{torch['version']}-", f"-{torch['version']}+cpu-")) for w in torch["wheels"]]
    cpu = [dict(torch, version=f"{torch['version']}+cpu", marker=m, wheels=wheels)
           for m in ("sys_platform == 'linux'", "sys_platform == 'darwin'")]
    data["packages"] = [p for p in data["packages"] if p is not torch] + cpu
    old = tmp_path / "pylock.cpu.toml"
    old.write_text(tomlkit.dumps(data), "utf-8")
    diff = diff_lock_files(old, DATA / "diff" / "pylock.cu128.toml")
    (change,) = [p for p in diff.packages if p.name.startswith("torch")]
    assert (change.name, change.change) == ("torch", "rebuilt")
    assert change.detail is not None and "local cpu -> (none)" in change.detail


def test_requires_python_and_groups_are_diffed_for_every_lock(
        tmp_path: Path) -> None:
    """Edited copy of pdm's lock: requires-python raised and a group dropped
    (no [tool.stacklock] in either): reported, and ``--exit-code`` says so."""
    lock = CORPUS / "pdm-ldlite.toml"
    data = tomllib.loads(lock.read_text("utf-8"))
    data["requires-python"] = ">=3.11"
    data["dependency-groups"] = [g for g in data["dependency-groups"] if g != "lint"]
    new = tmp_path / "pylock.toml"
    new.write_text(tomlkit.dumps(data), "utf-8")
    diff = diff_lock_files(lock, new)
    stack = {f.key: (f.old, f.new) for f in diff.stack}
    assert stack["requires-python"][1] == ">=3.11"
    assert "lint" in stack["dependency-groups"][0]  # type: ignore[operator]
    assert main(["diff", str(lock), str(new), "--exit-code"]) == 1


@pytest.mark.parametrize(("driver", "verdict"), [("535.54.03", "driver"),
                                                 ("610.43.02", None)])
def test_the_inferred_cuda_is_checked_against_the_driver(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: str,
        verdict: str | None) -> None:
    """uv's CUDA 13 torch lock, no ``--allow-no-gpu``: a CUDA 12-era driver is
    refused for what the lock holds (it was planned as a CPU lock before); the
    driver CUDA 13.3 bundles (its nvjitlink is 13.3) passes, and the note says
    what was checked."""
    monkeypatch.setenv("STACKLOCK_DRIVER_VERSION", driver)
    lock = CORPUS / "uv-maia3.toml"
    if verdict is None:
        result = install_lock(lock, venv=tmp_path / "env", python=PY, dry_run=True)
        assert any("CUDA 13" in n for n in result.notes)
        return
    with pytest.raises(PreflightError) as info:
        install_lock(lock, venv=tmp_path / "env", python=PY, dry_run=True)
    checks = [p for p in info.value.problems if p.check == verdict]
    assert checks and all("CUDA 13" in p.message for p in checks)
