"""Locks other tools wrote: install plans what ``Pylock.select()`` selects.

Inputs: the real locks of tests/data/foreign-locks/ (uv, pip, pdm, pex; see its
PROVENANCE.md) and ``expected-select.json`` there, recorded from packaging alone by
scripts/record_foreign_expectations.py for CPython 3.12 and 3.13. The host's
answer is asked of packaging here, at the host's own markers and tags.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import default_environment
from packaging.pylock import (
    PackageDirectory,
    Pylock,
    PylockSelectError,
    PylockValidationError,
)
from packaging.tags import sys_tags

from scripts.record_foreign_expectations import source_of
from stacklock.cli import main
from stacklock.errors import LockError, PreflightError
from stacklock.install.run import install_lock
from stacklock.install.selection import Wanted, select_packages
from stacklock.lock import load_lock
from tests.helpers.data import DATA
from tests.helpers.interpreters import target_interpreter
from tests.helpers.projects import commit_all, make_project

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
    assert _planned(json.loads(out)["plan"], lock) == reference


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
    """A lock as pip writes one for a git dependency (url + commit, no version)
    and a project folder next to the lock (relative path): uv builds both, the
    commit pinned, with nothing from the network; the plan says it drops
    ``--require-hashes`` (PEP 751 gives neither a hash)."""
    monkeypatch.setenv("UV_OFFLINE", "1")
    repo = make_project(tmp_path / "repo", "fromgit", "1.0", "git")
    commit = commit_all(repo)
    (repo / "fromgit" / "__init__.py").write_text("VALUE = 'later'\n")
    commit_all(repo)  # a newer commit: the locked one must win
    make_project(tmp_path / "app" / "local", "fromdir", "2.0", "dir")
    lock = tmp_path / "app" / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "pip"\n\n'
        '[[packages]]\nname = "fromgit"\n'
        f'vcs = {{ type = "git", url = "{repo.as_uri()}", commit-id = "{commit}" }}\n'
        '\n[[packages]]\nname = "fromdir"\n'
        'directory = { path = "local", editable = false }\n')
    result = install_lock(lock, venv=tmp_path / "env", python=PY, validate=False)
    assert "--require-hashes" not in result.plan.commands[1]
    assert [d.kind for d in result.plan.downloads] == ["vcs", "directory"]
    import subprocess

    shown = subprocess.run(
        [str(tmp_path / "env" / "bin" / "python"), "-c",
         "import fromgit, fromdir; print(fromgit.VALUE, fromdir.VALUE)"],
        check=True, capture_output=True, text=True).stdout.split()
    assert shown == ["git", "dir"]
