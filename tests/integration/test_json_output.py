"""One ``--json`` convention for every verb: each verb's output names its schema
first (``"schema": "stacklock.<kind>/1"``), has snake_case keys, and is valid
against ``docs/schemas/<kind>.schema.json``, which docs/formats.md lists; an
error with ``--json`` is a ``stacklock.error/1`` document on stdout as well as
its line on stderr. The verbs that run offline run here; the others' outputs
are checked where their own tests run them (every test reads ``--json`` through
``tests.helpers.jsonout``)."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

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


@pytest.mark.parametrize(("argv", "code", "kind"), [
    (["resolve", "{tmp}/nope.toml", "--json"], 2, "LockError|ProfileError"),
    (["profiles", "--json", "--bogus"], 2, "UsageError"),
    (["diff", "{tmp}/a.toml", "{tmp}/b.toml", "--format", "json"], 2, "LockError"),
    (["cuda", "show", "99.9", "--json"], 2, "CudaError"),
])
def test_an_error_with_json_is_a_document_on_stdout_and_a_line_on_stderr(
        argv: list[str], code: int, kind: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == code
    said = capsys.readouterr()
    error = parse_output(said.out, "error")
    assert error["exit_code"] == code and re.fullmatch(kind, error["error"]["type"])
    hint = error["error"]["hint"]
    assert said.err.count("\n") == 1 and error["error"]["message"] in said.err
    assert hint is None or hint in said.err
    without = [a for a in argv if a != "--json"]
    if "--format" not in without:  # the same error without --json: stderr only
        assert main(without) == code
        assert capsys.readouterr().out == ""


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
