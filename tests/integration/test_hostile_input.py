"""The hostile-input corpus (tests/data/hostile/): crafted pack manifests and locks
are refused with exit 2 and one line naming the file and field; nothing is written
outside the cache, and no traceback is printed."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.data import DATA, ROOT

HOSTILE = DATA / "hostile"
CASES = json.loads((HOSTILE / "packs" / "cases.json").read_text())["cases"]
LOCKS = sorted((HOSTILE / "locks").glob("*.toml"))


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stacklock.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False,
                          env=env)


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["STACKLOCK_CACHE_DIR"] = str(tmp_path / "cache")
    # no network: a pack install must not need one, and these must fail first
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"
    return env


def _refused(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- packs ------------------------------------------------------------------------


def _path(key: str) -> list[str | int]:
    """``members[2].sha256`` -> ["members", 1, "sha256"]."""
    out: list[str | int] = []
    for part in key.split("."):
        name, _, index = part.partition("[")
        out.append(name)
        if index:
            out.append(int(index.rstrip("]")))
    return out


def _get(data: Any, key: str) -> Any:
    for step in _path(key):
        data = data[step]
    return data


def _put(data: Any, key: str, value: Any) -> None:
    *parents, last = _path(key)
    for step in parents:
        data = data[step]
    data[last] = value


def _victim_text(victim: Path) -> str:
    text = str(victim)
    return text.replace("/", "/" * (64 - len(text) + 1), 1) if len(text) < 64 else text


def _craft(pack: Path, out: Path, case: dict[str, Any], victim: Path) -> Path:
    """``pack`` with its manifest edited as ``case`` says; the payload in front
    and the bootstrap modules are kept byte for byte."""
    blob = pack.read_bytes()
    with zipfile.ZipFile(pack) as zf:
        start = min(info.header_offset for info in zf.infolist())
        entries = {info.filename: zf.read(info) for info in zf.infolist()}
    manifest = json.loads(entries["manifest.json"])
    for key, value in case.get("set", {}).items():
        if isinstance(value, str):
            value = value.replace("{victim}", _victim_text(victim))
        _put(manifest, key, value)
    for key, source in case.get("copy", {}).items():
        _put(manifest, key, dict(_get(manifest, source)))
    if "replace" in case:
        manifest = case["replace"]
    text = case.get("raw") or json.dumps(manifest, indent=1)
    entries["manifest.json"] = text.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    out.write_bytes(blob[:start] + buf.getvalue())
    return out


@pytest.fixture(scope="module")
def real_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers.packs import write_small_pack

    return write_small_pack(tmp_path_factory.mktemp("pack") / "small.pack")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_crafted_manifest_is_refused_and_touches_nothing(
        case: dict[str, Any], real_pack: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    pack = _craft(real_pack, tmp_path / "crafted.pack", case, victim)
    env = _env(tmp_path)
    line = _refused(_run("install", str(pack), "--venv", str(tmp_path / "venv"),
                         "--allow-no-gpu", env=env), "manifest.json", case["expect"])
    assert str(pack) in line
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "venv").exists()
    store = tmp_path / "cache" / "artifacts"
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*"))


def test_the_bootstrap_refuses_a_crafted_manifest_too(real_pack: Path,
                                                       tmp_path: Path) -> None:
    """``python3 PACK install`` reads the manifest with the same checks before it
    unpacks anything of its own."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    case = next(c for c in CASES if c["name"] == "sha256-is-an-absolute-path")
    pack = _craft(real_pack, tmp_path / "crafted.pack", case, victim)
    result = subprocess.run(
        [sys.executable, str(pack), "install", "--venv", str(tmp_path / "venv")],
        capture_output=True, text=True, timeout=120, check=False, env=_env(tmp_path))
    _refused(result, "members[2].sha256")
    assert victim.read_text() == "keep me"


def test_a_pack_cut_short_is_named_as_one(real_pack: Path, tmp_path: Path) -> None:
    blob = real_pack.read_bytes()
    cut = tmp_path / "cut.pack"
    cut.write_bytes(blob[: len(blob) // 2])
    _refused(_run("install", str(cut), "--venv", str(tmp_path / "venv"),
                  env=_env(tmp_path)), str(cut), "pack whose end is missing")


def test_a_pack_missing_a_locked_wheel_is_refused_without_network(
        tmp_path: Path) -> None:
    from tests.helpers.packs import write_small_pack

    pack = write_small_pack(tmp_path / "short.pack", drop="six")
    line = _refused(_run("install", str(pack), "--venv", str(tmp_path / "venv"),
                         "--allow-no-gpu", env=_env(tmp_path)),
                    "six-1.17.0-py2.py3-none-any.whl", "does not carry it")
    assert "never downloads" in line
    assert not (tmp_path / "venv").exists()


# -- locks ------------------------------------------------------------------------


def _lock_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Hostile locks made at run time: name -> (path, what the line says)."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    huge = tmp_path / "huge.toml"
    with huge.open("wb") as fh:
        fh.truncate(65 << 20)  # sparse: 65 MiB of zeros, no disk used
    tar = tmp_path / "cut-pack.toml"
    tar.write_bytes(b"\0" * 257 + b"ustar\x0000" + b"\0" * 1024)
    head = 'lock-version = "1.0"\ncreated-by = "hostile"\n'
    deep = tmp_path / "deep-arrays.toml"  # 100,000 levels: a RecursionError before
    deep.write_text(head + "environments = " + "[" * 100_000 + "]" * 100_000 + "\n")
    tables = tmp_path / "deep-tables.toml"  # 5,000 inline tables
    tables.write_text(head + "[tool]\nx = " + "{a = " * 5_000 + "1" + "}" * 5_000
                      + "\n")
    return {"fifo": (fifo, "a FIFO"), "folder": (folder, "a directory"),
            "huge": (huge, "larger than 64 MiB"),
            "cut-pack": (tar, "pack whose end is missing"),
            "deep-arrays": (deep, "nested deeper than 64 levels"),
            "deep-tables": (tables, "nested deeper than 64 levels")}


@pytest.mark.parametrize("verb", [("diff", "{lock}", "{lock}"),
                                  ("install", "{lock}", "--dry-run", "--venv",
                                   "{tmp}/env"),
                                  ("check", "{lock}", "--offline")],
                         ids=["diff", "install", "check"])
def test_hostile_locks_are_refused_by_every_reader(
        verb: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """In this process (``stacklock.cli.main``, as the command runs it): an
    exception that escaped would fail the test as a traceback would."""
    from stacklock.cli import main

    cases = {path.stem: (path, "tool.stacklock.patches" if path.stem.startswith(
        "patch-") else "listed twice") for path in LOCKS}
    cases.update(_lock_cases(tmp_path))
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    for name, (lock, expect) in cases.items():
        args = [a.replace("{lock}", str(lock)).replace("{tmp}", str(tmp_path))
                for a in verb]
        code = main(args)
        out, err = capsys.readouterr()
        line = _refused(subprocess.CompletedProcess(args, code, out, err), expect)
        assert str(lock) in line, (name, line)


def test_the_corpus_files_say_what_they_are() -> None:
    for path in LOCKS:
        assert re.match(r"# hostile: \S", path.read_text()), path
