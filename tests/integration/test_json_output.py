"""One ``--json`` convention for every verb: each verb's output names its schema
first (``"schema": "stacklock.<kind>/1"``), has snake_case keys, and is valid
against ``docs/schemas/<kind>.schema.json``, which docs/formats.md lists; an
error with ``--json`` is a ``stacklock.error/1`` document on stdout as well as
its line on stderr. The verbs that run offline run here; the others' outputs
are checked where their own tests run them (every test reads ``--json`` through
``tests.helpers.jsonout``)."""

from __future__ import annotations

import ast
import itertools
import json
import re
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from stacklock.cli import _wants_json, main
from stacklock.cli.parser import _leaves, build_parser
from tests.helpers.data import DATA, ROOT
from tests.helpers.jsonout import check_document, parse_output, schemas
from tests.helpers.packs import write_small_pack

# the schemas each verb prints (resolve --check, install --rollback, ...)
VERBS = {
    "profiles": {"profiles"}, "links": {"links"},
    "resolve": {"resolve", "resolve-check", "resolve-check-all"}, "check": {"check"},
    "cuda list": {"cuda-list"}, "cuda show": {"cuda-show"},
    "cuda check-driver": {"cuda-check-driver"}, "cuda refresh": {"cuda-refresh"},
    "install": {"install", "install-rollback", "install-pack"},
    "pack": {"pack", "pack-list"}, "snapshot": {"snapshot"}, "diff": {"diff"},
    "validate": {"validate"}, "fleet install": {"fleet"}, "fleet report": {"fleet"},
    "bisect": {"bisect"}, "archive": {"archive"}, "update": {"update"},
}
SMALL = DATA / "install" / "pylock.small.toml"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _printed_kinds() -> set[str]:
    """The kinds the code prints: every ``print_json("kind", ...)`` and
    ``json_document("kind", ...)`` in the package."""
    found = set()
    for path in (ROOT / "stacklock").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                    node.func, "attr", None)) in ("print_json", "json_document")
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value)
    return found


def test_every_verb_with_json_has_its_schemas_documented() -> None:
    leaves = dict(_leaves(next(a for a in build_parser()._actions
                               if a.dest == "command")))  # type: ignore[arg-type]
    with_json = {name for name, p in leaves.items()
                 if any(a.dest == "json" for a in p._actions)}
    assert with_json == set(VERBS) == set(leaves)  # every verb takes --json
    assert set(ERRORS) == set(VERBS)  # and says its errors in JSON
    assert {code for _, code, _ in ERRORS.values()} == {2}  # bad input: exit 2
    kinds = set().union(*VERBS.values()) | {"error"}
    assert kinds == set(schemas()) == _printed_kinds()
    formats = (ROOT / "docs" / "formats.md").read_text("utf-8")
    for kind in kinds:
        assert f"`stacklock.{kind}/1`" in formats, kind
        assert f"schemas/{kind}.schema.json" in formats, kind
    # the field names are snake_case; keys that are data are maps in the schema
    names = set()
    for schema in schemas().values():
        names |= {key for node in _objects(schema) for key in node}
    assert not [n for n in names if not re.fullmatch(r"[a-z][a-z0-9_]*", n)]


def _objects(node: object) -> list[dict[str, object]]:
    """The ``properties`` of every object a schema describes."""
    found = []
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            found.append(node["properties"])
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for value in node:
            found += _objects(value)
    return found


def test_the_json_flag_is_found_before_a_bisect_command_only() -> None:
    assert _wants_json(["diff", "a", "b", "--json"])
    assert _wants_json(["diff", "a", "b", "--format", "json"])
    assert _wants_json(["diff", "a", "b", "--format=json"])
    assert not _wants_json(["diff", "a", "b", "--format", "markdown"])
    assert not _wants_json(["bisect", "g", "b", "--", "tool", "--json"])
    assert _wants_json(["bisect", "g", "b", "--json", "--", "tool"])


# every verb given input it refuses, offline: (argv, exit code 2, error type)
ERRORS = {
    "profiles": (["profiles"], 2, "ProfileError"),  # a broken ./profiles/bad.toml
    "links": (["links", "six", "--index", "{tmp}/none"], 2, "IndexUnreadable"),
    "resolve": (["resolve", "{tmp}/nope.toml"], 2, "ProfileError"),
    "check": (["check", "{tmp}/nope.toml"], 2, "LockError"),
    "cuda list": (["cuda", "list", "--platform", "windows"], 2, "StacklockError"),
    "cuda show": (["cuda", "show", "99.9"], 2, "CudaError"),
    "cuda check-driver": (["cuda", "check-driver", "99.9"], 2, "CudaError"),
    "cuda refresh": (["cuda", "refresh", "--version", "abc"], 2, "CudaError"),
    "install": (["install", "{tmp}/nope.toml", "--venv", "{tmp}/env"], 2,
                "LockError"),
    "pack": (["pack", "{tmp}/nope.toml", "-o", "{tmp}/x.pack"], 2, "LockError"),
    "snapshot": (["snapshot", "--venv", "{tmp}/none"], 2, "InstallError"),
    "diff": (["diff", "{tmp}/a.toml", "{tmp}/b.toml"], 2, "LockError"),
    "validate": (["validate", "{tmp}/nope.toml", "--venv", "{tmp}/env"], 2,
                 "LockError"),
    "fleet install": (["fleet", "install", "{tmp}/nope.pack", "--inventory",
                       "{tmp}/hosts", "--report", "{tmp}/fleet"], 2, "FleetError"),
    "fleet report": (["fleet", "report", "{tmp}/none"], 2, "FleetError"),
    "bisect": (["bisect", "{tmp}/a.toml", "{tmp}/b.toml", "--", "true"], 2,
               "LockError"),
    "archive": (["archive", "{tmp}/nope.toml", "{tmp}/dest"], 2, "LockError"),
    "update": (["update", "{tmp}/nope.toml"], 2, "ProfileError"),
}
# and the network: cuda refresh meets a proxy that refuses (exit 3)
NETWORK = {"cuda refresh (network)": (["cuda", "refresh"], 3, "CudaError")}


def _with_json(argv: list[str], flag: list[str]) -> list[str]:
    """``flag`` added before a bisect's ``--`` (after it, it is the command's)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:cut], *flag, *argv[cut:]]


@pytest.mark.parametrize("verb", sorted({**ERRORS, **NETWORK}))
def test_every_verb_s_error_is_a_document_on_stdout_and_a_line_on_stderr(
        verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv, code, kind = {**ERRORS, **NETWORK}[verb]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.toml").write_text("requirements = [\n")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    flags = [["--json"]] + ([["--format", "json"]] if verb == "diff" else [])
    for flag in flags:
        assert main(_with_json(argv, flag)) == code
        said = capsys.readouterr()
        error = parse_output(said.out, "error")
        assert (error["exit_code"], error["error"]["type"]) == (code, kind)
        hint = error["error"]["hint"]
        assert said.err.count("\n") == 1 and error["error"]["message"] in said.err
        assert hint is None or hint in said.err
    assert main(argv) == code  # the same error without --json: stderr only
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1


def test_a_usage_error_with_json_is_a_document_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "--json", "--bogus"]) == 2
    error = parse_output(capsys.readouterr().out, "error")
    assert error["error"]["type"] == "UsageError"


@pytest.mark.parametrize(("argv", "kind"), [
    (["profiles"], "profiles"),
    (["links", "sgl-kernel", "--index", str(DATA / "real" / "sgl-project-whl-gh-pages"
                                            / "cu130")], "links"),
    (["cuda", "list", "--platform", "linux-sbsa"], "cuda-list"),
    (["cuda", "show", "13.0"], "cuda-show"),
    (["diff", str(ROOT / "locks" / "pylock.blackwell-cu128.toml"),
      str(ROOT / "locks" / "pylock.pypi-cu130.toml")], "diff"),
])
def test_read_only_verbs(argv: list[str], kind: str, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    assert main([*argv, "--json"]) == 0
    parse_output(capsys.readouterr().out, kind)


@pytest.mark.parametrize("driver", ["580.82.07", "535.54.03", None])
def test_check_driver_answers_in_json_with_and_without_a_driver(
        driver: str | None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without a driver the answer is "no" (exit 1, as a driver too old), with
    ``driver: null`` and where it was looked for."""
    import stacklock.cuda.driver as found

    if driver is None:  # no /sys, /proc or nvidia-smi answer, whatever this host has
        monkeypatch.delenv("STACKLOCK_DRIVER_VERSION", raising=False)
        real = found.read_driver
        monkeypatch.setattr(found, "read_driver",
                            lambda: real(root=Path("/nonexistent"), env={}))
        monkeypatch.setenv("PATH", "/nonexistent")
    else:
        monkeypatch.setenv("STACKLOCK_DRIVER_VERSION", driver)
    code = main(["cuda", "check-driver", "13.0.1", "--json"])
    report = parse_output(capsys.readouterr().out, "cuda-check-driver")
    assert code == (0 if report["ok"] else 1)
    assert report["ok"] is (driver == "580.82.07")
    if driver is None:
        assert report["driver"] is None and "nvidia-smi" in report["missing"]
        assert [c["verdict"] for c in report["checks"]] == ["no-driver"]
        assert main(["cuda", "check-driver", "13.0.1"]) == 1
        assert capsys.readouterr().out.startswith("no driver: no NVIDIA driver found")


def test_an_offline_stack_through_every_install_verb(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A pack of pure-Python wheels for this interpreter: installed from the pack,
    snapshotted, checked, validated, installed again from its lock (the wheels
    are in the store now), rolled back; each printing its schema."""
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    pack = write_small_pack(tmp_path / "small.pack", python=PYTHON)
    venv = str(tmp_path / "env")

    def run(kind: str, *argv: str, code: int = 0) -> dict[str, object]:
        assert main([*argv, "--json"]) == code
        return parse_output(capsys.readouterr().out, kind)

    assert run("pack-list", "pack", "--list", str(pack))["python"] == PYTHON
    installed = run("install-pack", "install", str(pack), "--venv", venv,
                    "--python", sys.executable, "--allow-no-gpu")
    assert installed["skipped"] is False
    snap = run("snapshot", "snapshot", "--venv", venv, "-o",
               str(tmp_path / "pylock.snapshot.toml"))
    assert {p["name"] for p in snap["packages"]} >= {"six", "idna", "iniconfig"}
    run("check", "check", str(SMALL), "--offline")
    run("validate", "validate", str(SMALL), "--venv", venv, "--allow-no-gpu")
    again = run("install", "install", str(SMALL), "--venv", venv, "--python",
                sys.executable, "--reinstall", "--no-validate")
    assert again["replaced_generation"] == 1
    back = run("install-rollback", "install", "--rollback", "--venv", venv)
    assert (back["from_generation"], back["to_generation"]) == (2, 1)


def test_the_verbs_that_lock_check_update_archive_and_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A profile over a folder of three real wheels (a flat index): resolve,
    resolve --check of it and of every lock in locks/, up to date then stale,
    update changed then unchanged, archive, and fleet report of a recorded
    node's report; each printing its schema."""
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STACKLOCK_ARCHIVE", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(DATA / "install" / "wheels", tmp_path / "wheels")
    (tmp_path / "profiles").mkdir()
    profile = tmp_path / "profiles" / "folder.toml"
    text = (f'[target]\npython = "{PYTHON}"\n\n[[index]]\nname = "folder"\n'
            f'url = "{(tmp_path / "wheels").as_uri()}"\nkind = "flat"\n\n'
            '[requirements]\npackages = ["six", "idna"]\n')
    profile.write_text(text)

    def run(kind: str, *argv: str, code: int = 0) -> dict[str, Any]:
        assert main([*argv, "--json"]) == code, capsys.readouterr().err
        return parse_output(capsys.readouterr().out, kind)

    assert run("resolve", "resolve", "folder")["lock"] == "locks/pylock.folder.toml"
    assert run("resolve-check", "resolve", "--check", "folder")["up_to_date"]
    profile.write_text(text.replace('"idna"]', '"idna", "iniconfig"]'))
    stale = run("resolve-check", "resolve", "--check", "folder", code=1)
    assert [(c["name"], c["change"]) for c in stale["diff"]["packages"]] == [
        ("iniconfig", "added")]
    (one,) = run("resolve-check-all", "resolve", "--check", code=1)["locks"]
    assert (one["profile"], one["up_to_date"]) == ("folder", False)
    assert run("update", "update", "folder", code=4)["state"] == "changed"
    assert run("update", "update", "folder")["state"] == "unchanged"
    archived = run("archive", "archive", "locks/pylock.folder.toml", "archive")
    assert len(archived["files"]) == 3
    (tmp_path / "fleet" / "h200").mkdir(parents=True)
    shutil.copy(DATA / "pack-h200" / "report.json",
                tmp_path / "fleet" / "h200" / "report.json")
    assert [h["host"] for h in run("fleet", "fleet", "report", "fleet")["hosts"]] \
        == ["h200"]


# the verbs no run in this module prints, and the test that runs each with
# --json (a real Ansible, a bisect's installs, NVIDIA's recorded pages; pack
# writing a pack resolves its tools on PyPI: tests/live/test_pack_live.py)
ELSEWHERE = {
    "bisect": "tests/integration/test_bisect.py",
    "fleet install": "tests/integration/test_fleet_ansible.py",
    "cuda refresh": "tests/integration/test_cuda_refresh.py",
}
# cases of the verbs run here that need another test's data: check with a
# warning (a module no import loads, from a recorded native resolve)
CASES_ELSEWHERE = {
    "check with warnings": ("tests/integration/test_native_resolve.py",
                            "test_a_module_no_import_loads_is_a_warning_the_lock_"
                            "and_check_show"),
}


def _verbs_run_here() -> set[str]:
    """The verbs this module runs and checks: the command lines of ``run(kind,
    ...)`` calls, of ``main([..., "--json"])`` and of the read-only verbs'
    parameters."""
    lines = []
    for node in ast.walk(ast.parse(Path(__file__).read_text("utf-8"))):
        name = getattr(node, "func", None) and getattr(node.func, "id", None)
        if isinstance(node, ast.Call) and name == "run":
            lines.append(node.args[1:])
        elif isinstance(node, ast.Call) and name == "main" and isinstance(
                node.args[0], ast.List) and any(isinstance(a, ast.Constant) and
                                                a.value == "--json"
                                                for a in node.args[0].elts):
            lines.append(node.args[0].elts)
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(
                node.elts[0], ast.List) and isinstance(node.elts[1], ast.Constant):
            lines.append(node.elts[0].elts)
    found = set()
    for line in lines:
        words = list(itertools.takewhile(lambda a: isinstance(a, ast.Constant), line))
        verb = " ".join(a.value for a in words[:2])
        if words:  # not main([*argv, "--json"]) in run itself
            found.add(verb if verb in VERBS else words[0].value)
    return found


def _kinds_checked(source: str) -> set[str]:
    """The schemas ``source`` holds an output to: the kind given to
    ``run(kind, ...)``, ``parse_output(text, kind)`` and ``check_document(data,
    kind)``, and the read-only verbs' parameters."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        name = getattr(node, "func", None) and getattr(node.func, "id", None)
        at = {"run": 0, "parse_output": 1, "check_document": 1}.get(str(name))
        if isinstance(node, ast.Call) and at is not None and len(node.args) > at \
                and isinstance(node.args[at], ast.Constant):
            found.add(node.args[at].value)
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(
                node.elts[0], ast.List) and isinstance(node.elts[1], ast.Constant):
            found.add(node.elts[1].value)
    return found


def test_every_verb_is_run_with_json_and_checked() -> None:
    """Each verb runs to success in this module, or the test ELSEWHERE names
    runs it with --json and reads it through parse_output; every kind a verb
    prints is held to its schema."""
    here = _verbs_run_here()
    assert not here & set(ELSEWHERE)
    assert here | set(ELSEWHERE) == set(VERBS)
    for verb, test in ELSEWHERE.items():
        source = (ROOT / test).read_text("utf-8")
        assert "parse_output(" in source and "--json" in source, (verb, test)
    elsewhere = set().union(*(VERBS[verb] for verb in ELSEWHERE))
    kinds = _kinds_checked(Path(__file__).read_text("utf-8"))
    assert kinds | elsewhere >= set().union(*VERBS.values())  # each verb's outputs
    for case, (path, name) in CASES_ELSEWHERE.items():
        [test] = [node for node in ast.parse((ROOT / path).read_text("utf-8")).body
                  if isinstance(node, ast.FunctionDef) and node.name == name]
        assert "--json" in ast.unparse(test) and "check" in _kinds_checked(
            ast.unparse(test)), case


def test_a_pack_and_its_dry_run_as_pack_prints_them(tmp_path: Path) -> None:
    """``stacklock pack`` resolves the tools it carries on PyPI (a live test runs
    the verb); offline, the writer's two results from the recorded wheels are
    held to the same schema."""
    from stacklock.jsonout import json_document
    from stacklock.pack.format import read_manifest
    from stacklock.pack.writer import PackItem, PackPlan, PackResult
    from tests.helpers.packs import HEAD, small_pack_items

    pack = write_small_pack(tmp_path / "small.pack")
    items = [item for item, _ in small_pack_items()]
    plan = PackPlan(lock=SMALL, items=(*items, PackItem(
        path="runfile/x.run", kind="runfile", sha256="0" * 64, size=None)),
        head={**HEAD, "lock_sha256": items[0].sha256})
    written = PackResult(path=pack, size=pack.stat().st_size, sha256="0" * 64,
                         manifest=read_manifest(pack))
    for result in (plan, written):
        check_document(json.loads(json_document("pack", result.to_dict())), "pack")
    assert plan.to_dict()["sizes_unknown"] == 1
