"""The hostile-input corpus, round two: what each format's reader is given by an
attacker or a careless user on the newer surfaces. Every case is refused with
exit 2 and one line naming the file (or the index URL), no traceback; a venv's
broken file is a warning about its package. Deep nesting is made at run time
(5,000 to 100,000 levels: the files would be 200 kB each), see
tests/data/hostile/README.md."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from stacklock.bisect.steps import StepLog
from stacklock.errors import StacklockError
from stacklock.native.wheel import WheelReader
from tests.helpers.hostile import hostile_env, refused, run_cli
from tests.helpers.loopback import loopback
from tests.helpers.native_facts import load_facts

if TYPE_CHECKING:
    from collections.abc import Callable

DEEP = 100_000








def _deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


# -- 1. deep nesting: profiles (directly and through extends) ----------------------


def _deep_profile(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    deep = folder / "deep.toml"
    deep.write_text('[profile]\ndescription = "hostile"\n[requirements]\n'
                    f"packages = {_deep_json(DEEP)}\n")
    (folder / "child.toml").write_text('[profile]\nextends = "deep"\n')
    return deep


@pytest.mark.parametrize("name", ["deep", "child"])
def test_a_deep_profile_is_refused_directly_and_through_extends(
        tmp_path: Path, name: str) -> None:
    deep = _deep_profile(tmp_path / "profiles")
    line = refused(run_cli("resolve", str(deep.parent / f"{name}.toml"),
                         "-o", str(tmp_path / "out.toml"), env=hostile_env(tmp_path)),
                   str(deep), "nested deeper than 64 levels")
    assert "requirements" not in line or len(line) < 300
    assert not (tmp_path / "out.toml").exists()


# -- 1. deep nesting: a PEP 691 page from a hostile or broken index -----------------


def _index(answer: Callable[[str], tuple[bytes, str] | None]
           ) -> type[BaseHTTPRequestHandler]:
    """An index on loopback: ``answer(path)`` gives a page's body and content
    type, None for a 404."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            found = answer(self.path)
            if found is None:
                self.send_error(404)
                return
            body, kind = found
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _json_index(levels: int) -> type[BaseHTTPRequestHandler]:
    """A PEP 691 index whose one file entry nests ``levels`` deep (a page over
    64 kB is scanned entry by entry; a smaller one is decoded whole)."""
    entry = {"filename": "six-1.17.0-py2.py3-none-any.whl",
             "url": "six-1.17.0-py2.py3-none-any.whl",
             "hashes": {"sha256": "0" * 64}, "yanked": "@"}
    page = json.dumps({"meta": {"api-version": "1.1"}, "name": "six",
                       "files": [entry]})
    body = page.replace('"@"', _deep_json(levels)).encode()
    return _index(lambda path: (body, "application/vnd.pypi.simple.v1+json"))


@pytest.mark.parametrize("levels", [5_000, DEEP])
def test_a_deep_json_page_is_refused_by_links_and_resolve(
        tmp_path: Path, levels: int) -> None:
    with loopback(_json_index(levels)) as base:
        index = f"{base}/simple"
        refused(run_cli("links", "six", "--index", index, env=hostile_env(tmp_path)),
                base, "nested deeper than 64 levels")
        profile = tmp_path / "p.toml"
        profile.write_text(textwrap.dedent(f"""\
            [profile]
            description = "one index, hostile"
            [target]
            python = "3.12"
            [requirements]
            packages = ["six"]
            [[index]]
            name = "hostile"
            url = "{index}"
            """))
        refused(run_cli("resolve", str(profile), "-o", str(tmp_path / "out.toml"),
                      "--no-check", env=hostile_env(tmp_path, STACKLOCK_CACHE_DIR=str(
                          tmp_path / "cache2"))),
                base, "nested deeper than 64 levels")
    assert not (tmp_path / "out.toml").exists()


# -- 1. deep nesting: a facts entry, in the local cache and shared ------------------


def _checked_lock(tmp_path: Path, cache: Path) -> tuple[Path, list[str]]:
    """A lock of two wheels whose facts (recorded from the real wheels) are in
    ``cache``; the sha256 of each."""
    facts = load_facts()
    reader = WheelReader(httpx.Client(), cache_dir=cache)
    lines = ['lock-version = "1.0"', 'created-by = "stacklock"', ""]
    shas = []
    for key in ("torch==2.11.0", "nvidia-cuda-runtime==13.0.96"):
        wheel, natives = facts[key]
        reader.remember(natives)
        shas.append(wheel.sha256)
        lines += ["[[packages]]", f"name = {json.dumps(wheel.package)}",
                  f"version = {json.dumps(wheel.version)}",
                  "[[packages.wheels]]", f"name = {json.dumps(wheel.filename)}",
                  f"url = {json.dumps(wheel.url)}",
                  f'hashes = {{sha256 = "{wheel.sha256}"}}', ""]
    lines += ["[tool.stacklock]", "lock-version = 1", 'target = {python = "3.12", '
              'platform = "linux_x86_64", manylinux = "2_28"}']
    lock = tmp_path / "pylock.facts.toml"
    lock.write_text("\n".join(lines) + "\n")
    return lock, shas


def _deep_entry(path: Path, sha256: str) -> None:
    """A facts entry of the right format and wheel whose content nests deep."""
    entry = json.loads(gzip.decompress(path.read_bytes()))
    text = json.dumps({**entry, "sha256": sha256, "objects": "@"})
    path.write_bytes(gzip.compress(text.replace('"@"', _deep_json(DEEP)).encode()))


@pytest.mark.parametrize("where", ["cache", "shared"])
def test_a_deep_facts_entry_is_a_miss(tmp_path: Path, where: str) -> None:
    cache = tmp_path / "cache"
    lock, shas = _checked_lock(tmp_path, cache)
    assert run_cli("check", str(lock), "--offline",
                   env=hostile_env(tmp_path)).returncode == 0  # the entries as recorded
    more = {}
    if where == "shared":
        shared = tmp_path / "shared"
        (cache / "native").rename(shared)
        more["STACKLOCK_NATIVE_FACTS"] = str(shared)
    folder = shared if where == "shared" else cache / "native"
    for sha in shas:
        _deep_entry(folder / f"{sha}.json.gz", sha)
    refused(run_cli("check", str(lock), "--offline", env=hostile_env(tmp_path, **more)),
            "not cached")


# -- 1. and 2. bisect's resume log --------------------------------------------------

HEADER = {"good": "a.toml", "bad": "b.toml", "oracle": ["true"]}


@pytest.mark.parametrize("line", [
    '{"step": 2, "applied": ' + _deep_json(DEEP) + ', "state": "bad"}',
    '{"step": Infinity, "applied": ["numpy"], "state": "bad"}',
    '{"step": 1e400, "applied": ["numpy"], "state": "bad"}',
    '{"step": 2, "applied": ["numpy"], "state": "bad", "seconds": NaN}',
], ids=["deep", "infinity", "overflow", "nan"])
def test_a_crafted_resume_log_line_is_one_error_naming_file_and_line(
        tmp_path: Path, line: str) -> None:
    path = tmp_path / "bisect.log.jsonl"
    StepLog(path, HEADER)  # the header a first run writes
    with path.open("a") as fh:
        fh.write('{"step": 1, "applied": [], "state": "good"}\n' + line + "\n")
    with pytest.raises(StacklockError, match=rf"^{path}:3: not a bisect step") as e:
        StepLog(path, HEADER)
    assert len(str(e.value)) < 300


# -- 3. snapshot of a venv whose direct_url.json is broken --------------------------

DIRECT_URLS = {
    "vcs-without-vcs": '{"url": "https://example.org/x.git", '
                       '"vcs_info": {"commit_id": "' + "a" * 40 + '"}}',
    "a-list": '["https://example.org/x.whl"]',
    "not-json": "this is not JSON",
    "deep": '{"url": "x", "archive_info": ' + _deep_json(DEEP) + "}",
    "hashes-a-string": '{"url": "https://example.org/x.whl", '
                       '"archive_info": {"hashes": "sha256=00"}}',
}


def _dist_info(site: Path, name: str, direct_url: str | None) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\n"
                                   "Version: 1.0\n")
    (info / "INSTALLER").write_text("uv\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)


def test_a_broken_direct_url_json_is_a_warning_about_its_package(
        tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for name, text in DIRECT_URLS.items():
        _dist_info(site, name, text)
    sha = "b" * 64
    _dist_info(site, "good", json.dumps({
        "url": "https://example.org/good-1.0-py3-none-any.whl",
        "archive_info": {"hashes": {"sha256": sha}}}))
    out = tmp_path / "snapshot.toml"
    result = run_cli("snapshot", "--venv", str(venv), "-o", str(out),
                     env=hostile_env(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    warnings = result.stderr.splitlines()
    assert len(warnings) == len(DIRECT_URLS), result.stderr
    for name in DIRECT_URLS:
        assert any(line.startswith("warning: ") and "direct_url.json" in line
                   and f"{name} 1.0 is listed with an unknown origin" in line
                   for line in warnings), (name, warnings)
    assert all(len(line) < 400 for line in warnings)
    import tomllib

    lock = tomllib.loads(out.read_text())
    assert sorted(lock["tool"]["stacklock"]["unknown-origin"]) == sorted(DIRECT_URLS)
    good = next(p for p in lock["packages"] if p["name"] == "good")
    assert good["wheels"][0]["hashes"] == {"sha256": sha}


# -- untried: two indexes serving one name spelled differently ----------------------


def _simple_index(pages: dict[str, list[str]]) -> type[BaseHTTPRequestHandler]:
    """A PEP 503 index: ``pages`` maps a page's name (as asked) to file names."""

    def answer(path: str) -> tuple[bytes, str] | None:
        files = pages.get(path.rstrip("/").rsplit("/", 1)[-1])
        if files is None:
            return None
        return "".join(f'<a href="/f/{name}#sha256={"0" * 64}">{name}</a>'
                       for name in files).encode(), "text/html"

    return _index(answer)


@pytest.mark.parametrize("pin", ["torch", "Torch", "TORCH", "torch_"])
def test_a_pinned_project_comes_only_from_its_index_however_spelled(
        tmp_path: Path, pin: str) -> None:
    """The first index serves a look-alike torch 9.9.9 (under ``torch``, ``Torch``
    and ``torch_``); the second, torch pinned to it, serves torch 1.0.0 and, on
    the same page, ``Torch-8.8.8`` and ``torch_-7.7.7``. Only the pinned index's
    torch files fit; a pin no project name can be (``torch_`` would pin
    ``torch-``, leaving torch to the first index) is refused."""
    look_alike = ["torch-9.9.9-py3-none-any.whl"]
    other = {"torch": look_alike, "Torch": look_alike, "torch_": look_alike}
    pinned = {"torch": ["torch-1.0.0-py3-none-any.whl", "Torch-8.8.8-py3-none-any.whl",
                        "torch_-7.7.7-py3-none-any.whl"]}
    with loopback(_simple_index(other)) as first, \
            loopback(_simple_index(pinned)) as second:
        profile = tmp_path / "p.toml"
        profile.write_text(textwrap.dedent(f"""\
            [profile]
            description = "a pinned project, a look-alike on the first index"
            [target]
            python = "3.12"
            [requirements]
            packages = ["torch"]
            [[index]]
            name = "first"
            url = "{first}/simple"
            [[index]]
            name = "pinned"
            url = "{second}/simple"
            packages = ["{pin}"]
            """))
        result = run_cli("links", "torch", "--profile", str(profile), "--all",
                         "--json", env=hostile_env(tmp_path))
    if pin == "torch_":
        refused(result, str(profile), "index[1].packages[0]", "'torch_'")
        return
    assert result.returncode == 0, result.stderr[-2000:]
    links = json.loads(result.stdout)["links"]
    fits = sorted((link["index"], link["version"]) for link in links
                  if link["compatible"])
    assert fits == [("pinned", "1.0.0"), ("pinned", "8.8.8")]
    other_project = next(link for link in links if link["version"] == "7.7.7")
    assert other_project["reason"] == "file of project 'torch-', not 'torch'"


# -- 7. long values are shortened in messages ---------------------------------------


def test_a_huge_metadata_value_is_shortened_in_the_error() -> None:
    """A 20,000-clause Requires-Dist that does not parse (packaging's message
    repeats the whole line, 378 kB): the error names the wheel and shows the
    head of it."""
    from stacklock.errors import MetadataError
    from stacklock.metadata.parse import parse_wheel_metadata

    clauses = b",".join(b"!=1.%d" % i for i in range(20_000))
    raw = (b"Metadata-Version: 2.1\nName: six\nVersion: 1.17.0\n"
           b"Requires-Dist: idna " + clauses + b",<<2\n")
    with pytest.raises(MetadataError) as caught:
        parse_wheel_metadata(raw, "six-1.17.0-py2.py3-none-any.whl")
    assert "six-1.17.0-py2.py3-none-any.whl" in str(caught.value)
    assert len(str(caught.value)) < 1000, len(str(caught.value))


def test_a_huge_profile_requirement_is_shortened_in_the_error(tmp_path: Path) -> None:
    clauses = ",".join(f"!=1.{i}" for i in range(20_000))
    profile = tmp_path / "p.toml"
    profile.write_text(f'[requirements]\npackages = ["idna {clauses},<<2"]\n')
    refused(run_cli("resolve", str(profile), "-o", str(tmp_path / "out.toml"),
                    env=hostile_env(tmp_path)),
            str(profile), "requirements.packages[0]", "characters)")
