"""A profile with ``[[patches]]`` over a real wheel, and the loopback index
serving it.

The wheels are the real PyPI ones of tests/data/install/wheels/ (recorded by
tests/data/install/record.py); the index is a PEP 503 page per project on
127.0.0.1 whose file URLs answer ``Range`` as a real file server does
(:func:`tests.helpers.ranges.answer_range`), and every request is kept so a test
can tell a range read from a download.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name, parse_wheel_filename

from tests.helpers.data import DATA
from tests.helpers.loopback import loopback
from tests.helpers.ranges import answer_range

if TYPE_CHECKING:
    from collections.abc import Iterator

WHEELS = DATA / "install" / "wheels"
PATCHES = DATA / "patches"
INICONFIG = "iniconfig-2.3.1-py3-none-any.whl"
SIX = "six-1.17.0-py2.py3-none-any.whl"
IDNA = "idna-3.20-py3-none-any.whl"
SEMICOLON = PATCHES / "iniconfig-semicolon.patch"
PATCHED_FILE = "iniconfig/_parse.py"


@dataclass
class Index:
    url: str
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    ranges: bool = True  # False: the server ignores Range (200, whole file)

    def fetched(self, name: str) -> list[str | None]:
        """The Range headers of every request for the file ``name``."""
        return [r for path, r in self.requests if path == f"/files/{name}"]


@contextmanager
def serve_index(names: tuple[str, ...] = (INICONFIG, SIX, IDNA)) -> Iterator[Index]:
    """A simple index of the recorded wheels ``names`` on loopback."""
    files = {n: (WHEELS / n).read_bytes() for n in names}
    pages: dict[str, str] = {}
    for name, data in files.items():
        project = canonicalize_name(parse_wheel_filename(name)[0])
        sha = hashlib.sha256(data).hexdigest()
        pages.setdefault(project, "")
        pages[project] += f'<a href="../../files/{name}#sha256={sha}">{name}</a>\n'
    index = Index(url="", files=files)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            rng = self.headers.get("Range")
            index.requests.append((self.path, rng))
            if self.path.startswith("/simple/"):
                project = self.path.split("/")[2]
                if project not in pages:
                    self.send_error(404)
                    return
                body = f"<html><body>\n{pages[project]}</body></html>".encode()
                self._send(200, [("Content-Type", "text/html")], body)
                return
            name = self.path.removeprefix("/files/")
            if name not in index.files:
                self.send_error(404)
                return
            status, headers, body = answer_range(
                index.files[name], "GET", rng if index.ranges else None)
            self._send(status, [(k, v) for k, v in headers
                                if k.lower() != "content-length"], body)

        def _send(self, status: int, headers: list[tuple[str, str]],
                  body: bytes) -> None:
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with loopback(Handler) as base:
        index.url = base
        yield index


def write_profile(folder: Path, index: str, *, patches: list[dict[str, str]],
                  packages: tuple[str, ...] = ("iniconfig==2.3.1",),
                  name: str = "patched") -> Path:
    """A profile over ``index`` (a base URL) with ``patches`` (each a
    ``[[patches]]`` table) at ``folder/NAME.toml``."""
    lines = ['[profile]', 'description = "patched"',
             '[target]', 'python = "3.11"',
             '[[index]]', 'name = "local"', f'url = "{index}/simple"',
             '[requirements]', f'packages = {list(packages)!r}'.replace("'", '"')]
    for patch in patches:
        lines.append("[[patches]]")
        lines.extend(f'{key} = "{value}"' for key, value in patch.items())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def semicolon(folder: Path, **more: str) -> dict[str, str]:
    """The ``[[patches]]`` table of the iniconfig patch, its file copied into
    ``folder/patches/``."""
    (folder / "patches").mkdir(parents=True, exist_ok=True)
    copy = folder / "patches" / SEMICOLON.name
    copy.write_bytes(SEMICOLON.read_bytes())
    return {"package": "iniconfig", "file": f"patches/{SEMICOLON.name}",
            "reason": "values with ';' (URLs, DSNs) were cut at it", **more}


def resolve_lock(folder: Path, index: str, *, patches: list[dict[str, str]],
                 packages: tuple[str, ...] = ("iniconfig==2.3.1",),
                 name: str = "patched") -> Path:
    """``stacklock resolve`` of :func:`write_profile`'s profile into
    ``folder/locks/pylock.NAME.toml`` (no native check: pure wheels)."""
    from stacklock.cli import main

    profile = write_profile(folder, index, patches=patches, packages=packages,
                            name=name)
    out = folder / "locks" / f"pylock.{name}.toml"
    code = main(["resolve", str(profile), "-o", str(out), "--no-check", "-q"])
    assert code == 0, code
    return out


# iniconfig's answer for a value holding ';': "a" unpatched, "a;b" patched
PARSE_SEMICOLON = ("import iniconfig, sys; print(iniconfig.IniConfig.parse('x', "
                   "data='[s]\\nu = a;b\\n')['s']['u'])")

