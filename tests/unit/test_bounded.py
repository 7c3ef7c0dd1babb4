"""The bounded readers (stacklock.bounded): the only code that calls ``json`` or
``tomllib`` to parse, each bound enforced by the reader itself. The first test
walks the package's code and fails on a parse anywhere else."""

from __future__ import annotations

import ast
import json
import os
import random
import threading
from pathlib import Path

import pytest

from stacklock.bounded import (
    MAX_DEPTH,
    Malformed,
    parse_json,
    parse_json_at,
    parse_toml,
    read_regular,
    shorten,
)
from tests.helpers.data import ROOT

PACKAGE = ROOT / "stacklock"
PARSERS = {"json": {"load", "loads", "JSONDecoder"},
           "tomllib": {"load", "loads"},
           "tomlkit": {"load", "loads", "parse", "TOMLDocument"}}
# Code that runs in another interpreter, where stacklock is not installed: the
# probe inside the venv under test parses only the argv stacklock gave it.
ELSEWHERE = {"stacklock/bounded.py": "the readers themselves",
             "stacklock/validate/_probe_script.py": "runs inside the venv under test"}


def direct_parses(source: str) -> list[str]:
    """``line: what`` for every parse of JSON or TOML in ``source`` that does not
    go through the bounded readers."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> parser module
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in PARSERS:
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in PARSERS:
            for alias in node.names:
                if alias.name in PARSERS[node.module] or alias.name == "*":
                    found.append(f"{node.lineno}: from {node.module} import "
                                 f"{alias.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if (isinstance(base, ast.Name) and base.id in modules
                and node.attr in PARSERS[modules[base.id]]):
            found.append(f"{node.lineno}: {base.id}.{node.attr}")
        elif node.attr == "raw_decode":
            found.append(f"{node.lineno}: .raw_decode")
    for node in ast.walk(tree):  # httpx's Response.json() parses unbounded
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "json" and not node.args):
            found.append(f"{node.lineno}: .json()")
    return found


# RECORD has one reader (stacklock/record.py): nothing else reads CSV, or the
# bytes of a RECORD, or asks importlib.metadata for them (csv, unbounded)
RECORD_READER = "stacklock/record.py"
_READS = {"read_text", "read_bytes", "open", "read_regular"}
_METADATA = {"importlib.metadata", "importlib_metadata"}


def _names_record(node: ast.AST) -> bool:
    """``X / "RECORD"`` or the string ``"RECORD"``."""
    if isinstance(node, ast.Constant):
        return node.value == "RECORD"
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant) and node.right.value == "RECORD")


def record_reads(source: str) -> list[str]:
    """``line: what`` for every CSV read, every read of a RECORD file and every
    importlib.metadata file list in ``source``."""
    tree = ast.parse(source)
    csv_names: set[str] = set()
    uses_metadata = False  # importlib.metadata parses RECORD for .files
    record_paths: set[str] = set()  # names given X / "RECORD"
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "csv":
                    csv_names.add(alias.asname or "csv")
                uses_metadata |= alias.name in _METADATA
        elif isinstance(node, ast.ImportFrom):
            if node.module == "csv":
                found += [f"{node.lineno}: from csv import {a.name}"
                          for a in node.names
                          if a.name in ("reader", "DictReader", "*")]
            uses_metadata |= node.module in _METADATA or (
                node.module == "importlib"
                and any(a.name == "metadata" for a in node.names))
            if node.module in _METADATA:
                found += [f"{node.lineno}: from {node.module} import files"
                          for a in node.names if a.name == "files"]
        elif (isinstance(node, ast.Assign) and _names_record(node.value)
              and not isinstance(node.value, ast.Constant)):
            record_paths.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if (isinstance(node.value, ast.Name) and node.value.id in csv_names
                    and node.attr in ("reader", "DictReader")):
                found.append(f"{node.lineno}: csv.{node.attr}")
            if uses_metadata and node.attr == "files":
                found.append(f"{node.lineno}: importlib.metadata's .files")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else (
            func.id if isinstance(func, ast.Name) else "")
        if name not in _READS:
            continue
        receiver = func.value if isinstance(func, ast.Attribute) else None
        if any(_names_record(n) or (isinstance(n, ast.Name) and n.id in record_paths)
               for n in (receiver, *node.args) if n is not None):
            found.append(f"{node.lineno}: {name} of a RECORD")
    return found


def test_nothing_reads_a_record_outside_its_reader() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name != RECORD_READER:
            offenders += [f"{name}:{hit}" for hit in record_reads(path.read_text())]
    assert not offenders, (
        "read RECORD through stacklock.record (load_record, wheel_record, "
        "parse_record, record_bytes):\n" + "\n".join(offenders))


@pytest.mark.parametrize("source", [
    "import csv\nrows = csv.reader(text.splitlines())",
    "import csv as c\nc.DictReader(fh)",
    "from csv import reader\n",
    "rows = (dist_info / 'RECORD').read_text('utf-8')",
    "data = open(folder / 'RECORD', 'rb')",
    "text = dist.read_text('RECORD')",
    "import importlib.metadata as md\nfor f in md.files('torch'): pass",
    "import importlib.metadata as md\nfor d in md.distributions():\n    d.files",
    "record = dist_info / 'RECORD'\nif record.is_file():\n    record.read_bytes()",
    "from importlib import metadata\nmetadata.files('six')",
    "from importlib.metadata import files\n",
])
def test_the_walk_finds_each_way_to_read_a_record(source: str) -> None:
    assert record_reads(source)


def test_the_walk_leaves_writing_and_looking_alone() -> None:
    assert not record_reads("import csv\ncsv.writer(buf).writerow(row)\n"
                            "(dist_info / 'RECORD').is_file()\n"
                            "atomic_write_bytes(dist_info / 'RECORD', data)\n"
                            "from importlib import metadata\nmetadata.requires('x')")


def test_nothing_parses_json_or_toml_outside_the_bounded_readers() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name in ELSEWHERE:
            continue
        offenders += [f"{name}:{hit}" for hit in direct_parses(path.read_text())]
    assert not offenders, (
        "parse through stacklock.bounded (parse_json, parse_toml, read_regular), "
        "inside the format's one reader:\n" + "\n".join(offenders))


@pytest.mark.parametrize("source", [
    "import json\njson.loads(b)",
    "import json as j\nj.load(fh)",
    "import tomllib\ntomllib.loads(t)",
    "from tomllib import loads\n",
    "from json import JSONDecoder\n",
    "import json\nd = json.JSONDecoder()\nd.raw_decode(t, 0)",
    "import tomlkit\ntomlkit.parse(t)",
    "def f(response):\n    return response.json()",
    "def f():\n    import json\n    return json.loads('1')",
])
def test_the_walk_finds_each_way_to_parse(source: str) -> None:
    assert direct_parses(source)


def test_the_walk_leaves_writing_alone() -> None:
    assert not direct_parses("import json, tomlkit\njson.dumps(x)\n"
                             "tomlkit.dumps(d)\nhttpx.post(u, json=payload)")


def test_every_exception_is_a_file_that_exists() -> None:
    assert all((ROOT / name).is_file() for name in ELSEWHERE)


# -- the bounds, each enforced by the reader ----------------------------------------


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 900, 5_000, 100_000])
def test_json_nested_too_deep_is_malformed_at_any_depth(levels: int) -> None:
    for text in ("[" * levels + "]" * levels,
                 '{"a":' * levels + "1" + "}" * levels,
                 "[" * levels):  # and never closed
        with pytest.raises(Malformed) as caught:
            parse_json(text.encode())
        assert "nested deeper" in str(caught.value) or "not valid JSON" in str(
            caught.value)


def test_json_at_the_bound_and_brackets_inside_strings_are_fine() -> None:
    deepest = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(deepest) is not None
    text = '{"a": "[[[\\"{{{", "b": [[1]], "c": "\\\\"}'
    assert parse_json(text) == {"a": '[[["{{{', "b": [[1]], "c": "\\"}
    with pytest.raises(Malformed, match="nested deeper"):
        parse_json("[" + deepest + "]")


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def test_json_depth_is_counted_right_whatever_the_strings_hold() -> None:
    """Random documents whose strings hold brackets, quotes and escapes: the
    depth the reader allows is the depth json builds, no more, no less."""
    rng = random.Random(44)
    letters = '[]{}"\\\n\t ab\u00e9'

    def text() -> str:
        return "".join(rng.choice(letters) for _ in range(rng.randrange(6)))

    def value(levels: int) -> object:
        if not levels or rng.random() < 0.3:
            return rng.choice([text(), 1, None, 1.5, True])
        if rng.random() < 0.5:
            return [value(levels - 1) for _ in range(rng.randrange(3))]
        return {text(): value(levels - 1) for _ in range(rng.randrange(3))}

    for _ in range(2000):
        doc = value(rng.randrange(9))
        depth = _depth(doc)
        encoded = json.dumps(doc, ensure_ascii=rng.random() < 0.5,
                             indent=rng.choice([None, 1]))
        assert parse_json(encoded, max_depth=max(depth, 1)) == doc
        if depth > 1:
            with pytest.raises(Malformed, match="nested deeper"):
                parse_json(encoded, max_depth=depth - 1)


@pytest.mark.parametrize("text", ['{"step": Infinity}', '{"step": -Infinity}',
                                  '{"step": NaN}', '{"step": 1e400}'])
def test_json_numbers_that_are_not_finite_are_refused(text: str) -> None:
    with pytest.raises(Malformed) as caught:
        parse_json(text)
    assert caught.value.bound


def test_json_syntax_and_encoding_errors_are_one_malformed() -> None:
    with pytest.raises(Malformed, match=r"line 1 column 9") as caught:
        parse_json(b'{"a": [1}')
    assert not caught.value.bound
    with pytest.raises(Malformed, match="not UTF-8"):
        parse_json(b"\xff\xfe")
    with pytest.raises(Malformed):
        parse_json("1" * 5000)  # more digits than int() converts


def test_one_entry_of_a_page_is_bounded_too() -> None:
    entry = '{"filename": "x.whl", "yanked": ' + "[" * 5000 + "]" * 5000 + "}"
    text = '{"files": [' + entry + "]}"
    with pytest.raises(Malformed, match="nested deeper"):
        parse_json_at(text, text.index("{", 1))
    shallow = '{"files": [{"filename": "x.whl"}]}'
    assert parse_json_at(shallow, 11) == ({"filename": "x.whl"}, len(shallow) - 2)


@pytest.mark.parametrize("text", [
    "a = " + "[" * 100_000 + "]" * 100_000,
    "a = " + "{b = " * 5_000 + "1" + "}" * 5_000,
    "a" + ".a" * 100_000 + " = 1",  # tomllib: quadratic memory (10,000: 400 MB)
    "[" + "a." * 100_000 + "a]\nx = 1",
    "a = {" + "b." * 60 + "c = {" + "d." * 60 + "e = 1}}",  # each part allowed
])
def test_toml_nested_too_deep_is_malformed(text: str) -> None:
    with pytest.raises(Malformed) as caught:
        parse_toml(text)
    assert caught.value.bound


def test_toml_brackets_and_dots_in_strings_and_comments_are_fine() -> None:
    dots = ".".join(["x"] * 200)
    text = (f'a = "{"[" * 100}"  # {"[" * 100}\nb = \'{dots}\'\n'
            f'c = """\n{"{" * 100}\n"""\n[[t]]\nx.y.z = 1.5\n')
    data = parse_toml(text)
    assert data["b"] == dots and data["t"] == [{"x": {"y": {"z": 1.5}}}]


def test_toml_inf_and_nan_are_refused() -> None:
    for text in ("a = inf", "a = -inf", "a = nan"):
        with pytest.raises(Malformed, match="not a finite number"):
            parse_toml(text)


def test_read_regular_refuses_what_is_not_a_small_regular_file(tmp_path: Path
                                                               ) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Timer(30, lambda: fifo.open("w").close())  # unblock a hang
    writer.start()
    try:
        with pytest.raises(Malformed, match="a FIFO"):
            read_regular(fifo, limit=10)
    finally:
        writer.cancel()
    with pytest.raises(Malformed, match="a directory"):
        read_regular(tmp_path, limit=10)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(Malformed, match="larger than 10 bytes"):
        read_regular(big, limit=10)
    assert read_regular(big, limit=11) == b"x" * 11
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent", limit=10)


def test_a_long_value_is_shortened_and_its_length_said() -> None:
    clauses = ",".join([">=3.8"] * 20_000)
    line = shorten(clauses)
    assert len(line) < 200 and "119,999 characters" in line
    assert shorten("short") == "short"
