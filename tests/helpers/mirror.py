"""A loopback mirror of the three indexes of profiles/blackwell-cu130.toml.

One ThreadingHTTPServer serves, on one port:

- ``/simple/<project>/``: the PyPI role, real PEP 691 JSON pages of pypi.org trimmed
  to the wheels the target can install (``index.json.gz`` in
  tests/data/mirror/simple/), file URLs made relative (``../../files/<name>``),
  the way mirrors such as bandersnatch serve them;
- ``/whl/cu130/<project>/``: the PyTorch index role, PyPI's real torch,
  torchvision and torchaudio files written in download.pytorch.org's page format;
- ``/files/<wheel>`` and ``/whl/cu130/<wheel>``: only the range reads stacklock
  makes for METADATA, answered from a cassette of PyPI's real answers
  (:class:`Ranges`); never a whole wheel;
- ``/sgl/<path>``: tests/data/real/sgl-project-whl-gh-pages/ byte for byte.

``scripts/record_mirror.py`` builds tests/data/mirror/ with the functions below and
a ``fill`` hook that fetches what the mirror lacks from real PyPI. The sgl-kernel
page links to github.com release assets, which cannot be reached from here:
:func:`make_mirror_client` routes github.com to a stand-in wheel (see
tests/data/mirror/PROVENANCE.md) and refuses every other host that is not loopback.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import threading
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from stacklock.http import make_http_client
from stacklock.target import Target
from tests.helpers.ranges import range_response

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data" / "mirror"
SGL_ROOT = TESTS / "data" / "real" / "sgl-project-whl-gh-pages"
PYTORCH_PROJECTS = ("torch", "torchvision", "torchaudio")
PYTORCH_PREFIX = "/whl/cu130/"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"

RANGES = "ranges"

# fill(method, path or wheel filename, Range header) may create what is missing
Fill = Callable[[str, str, "str | None"], None]


def is_usable(filename: str, target: Target) -> bool:
    """A wheel with a tag the target installs (sdists are never locked)."""
    if not filename.endswith(".whl"):
        return False
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:  # e.g. pydantic-0.18-py36+-none-any.whl
        return False
    return not set(target.tags()).isdisjoint(tags)


def trim_json_page(page: dict[str, Any], target: Target,
                   href_prefix: str) -> dict[str, Any]:
    """PyPI's PEP 691 page with only the wheels ``target`` can use, each url
    replaced by ``href_prefix`` + the quoted filename; every other field as
    recorded (``versions`` keeps the versions that still have a file)."""
    files = []
    for entry in page["files"]:
        if is_usable(entry["filename"], target):
            files.append({**entry, "url": href_prefix + quote(entry["filename"])})
    kept = {str(parse_wheel_filename(f["filename"])[1]) for f in files}
    out = {**page, "files": files}
    if "versions" in page:
        out["versions"] = [v for v in page["versions"] if _same_version(v, kept)]
    return out


def _same_version(text: str, kept: set[str]) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(text)) in kept
    except InvalidVersion:
        return False


def render_pytorch_page(name: str, files: list[dict[str, Any]],
                        timestamp: int) -> bytes:
    """download.pytorch.org's page skeleton (tests/data/real/PROVENANCE.md, section
    1) around one anchor per file: root-relative href with ``%2B``, the wheel's
    ``#sha256=``, both PEP 658/714 attributes when a METADATA file exists, no
    ``data-requires-python`` (PyTorch writes it only for networkx)."""
    lines = ["<!DOCTYPE html>", "<html>", "  <body>", f"    <h1>Links for {name}</h1>"]
    for entry in sorted(files, key=lambda e: e["filename"]):
        href = PYTORCH_PREFIX + quote(entry["filename"])
        sha = entry.get("hashes", {}).get("sha256")
        attrs = f'href="{href}#sha256={sha}"' if sha else f'href="{href}"'
        core = entry.get("core-metadata")
        if isinstance(core, dict) and core.get("sha256"):
            meta = f"sha256={core['sha256']}"
            attrs += f' data-dist-info-metadata="{meta}" data-core-metadata="{meta}"'
        lines.append(f"    <a {attrs}>{entry['filename']}</a><br/>")
    lines += ["</body></html>", f"<!--TIMESTAMP {timestamp}-->", ""]
    return "\n".join(lines).encode()


def read_maybe_gz(path: Path) -> bytes | None:
    if path.is_file():
        return path.read_bytes()
    packed = path.with_name(path.name + ".gz")
    if packed.is_file():
        return gzip.decompress(packed.read_bytes())
    return None


def locate(url_path: str, root: Path = DATA,
           sgl_root: Path = SGL_ROOT) -> tuple[bytes, str] | None:
    """The body and content type the mirror serves at ``url_path``."""
    rel = unquote(url_path).lstrip("/")
    if ".." in rel.split("/"):
        return None
    base, folder = root, rel
    if rel.startswith("sgl/"):
        base, folder = sgl_root, rel[len("sgl/"):]
    if rel == "" or rel.endswith("/"):
        for name, ctype in (("index.json", JSON_TYPE), ("index.html", "text/html")):
            body = read_maybe_gz(base / folder / name)
            if body is not None:
                return body, ctype
        return None
    body = read_maybe_gz(base / folder)
    return None if body is None else (body, "application/octet-stream")


class Ranges:
    """The recorded answers of files.pythonhosted.org to stacklock's METADATA range
    reads (a tests/helpers/cassette.py cassette), looked up by wheel filename, so the
    mirror answers ``GET /files/<wheel>`` with ``Range`` exactly as PyPI did."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reload()

    def reload(self) -> None:
        self._index: dict[tuple[str, str, str | None], dict[str, Any]] = {}
        path = self.root / "cassette.json"
        if path.is_file():
            for entry in json.loads(path.read_text("utf-8"))["entries"]:
                name = unquote(urlsplit(entry["url"]).path.rsplit("/", 1)[-1])
                self._index[(entry["method"], name, entry["range"])] = entry

    def find(self, method: str, filename: str,
             range_: str | None) -> tuple[int, list[tuple[str, str]], bytes] | None:
        entry = self._index.get((method, filename, range_))
        if entry is None:
            return None
        body = read_maybe_gz(self.root / "bodies" / entry["body"]) or b""
        headers = [(k, v) for k, v in entry["headers"]
                   if k not in ("content-length", "date", "connection")]
        if method == "HEAD":
            length = dict(entry["headers"]).get("content-length", "0")
            return entry["status"], [*headers, ("content-length", length)], b""
        return entry["status"], [*headers, ("content-length", str(len(body)))], body


class _Handler(BaseHTTPRequestHandler):
    server: _MirrorServer

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def _answer(self) -> None:
        path = urlsplit(self.path).path
        server = self.server
        server.requested.append(path)
        if path.endswith(".whl"):
            self._wheel(unquote(path.rsplit("/", 1)[-1]))
            return
        found = locate(path, server.root, server.sgl_root)
        if found is None and server.fill is not None:
            server.fill(self.command, path, None)
            found = locate(path, server.root, server.sgl_root)
        if found is None:
            self.send_error(404)
            return
        body, ctype = found
        self._send(200, [("content-type", ctype),
                         ("content-length", str(len(body)))], body)

    def _wheel(self, filename: str) -> None:
        server = self.server
        range_ = self.headers.get("range")
        found = server.ranges.find(self.command, filename, range_)
        if found is None and server.fill is not None:
            server.fill(self.command, filename, range_)
            server.ranges.reload()
            found = server.ranges.find(self.command, filename, range_)
        if found is None:  # only recorded reads exist: no whole wheels here
            self.send_error(404)
            return
        self._send(*found)

    def _send(self, status: int, headers: list[tuple[str, str]],
              body: bytes) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _MirrorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, fill: Fill | None, sgl_root: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root, self.fill, self.sgl_root = root, fill, sgl_root
        self.ranges = Ranges(root / RANGES)
        self.requested: list[str] = []


class Mirror:
    """A running mirror: ``url`` is its root, ``requested`` the paths asked for."""

    def __init__(self, server: _MirrorServer) -> None:
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"

    @property
    def requested(self) -> list[str]:
        return self._server.requested

    def index_urls(self, sgl_page: str = "sgl/cu130") -> dict[str, str]:
        """``--index NAME=URL`` for every index of blackwell-cu130."""
        return {"pypi": f"{self.url}/simple",
                "pytorch-nightly-cu130": f"{self.url}{PYTORCH_PREFIX.rstrip('/')}",
                "sgl-kernel-cu130": f"{self.url}/{sgl_page}"}


@contextmanager
def serve_mirror(root: Path = DATA, fill: Fill | None = None,
                 sgl_root: Path = SGL_ROOT) -> Iterator[Mirror]:
    """Serve the mirror; ``sgl_root`` replaces the real sgl-kernel pages (a
    derived page), ``fill(path)`` may create what is missing before a 404."""
    server = _MirrorServer(root, fill, sgl_root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Mirror(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class WheelHost(httpx.BaseTransport):
    """Every host but loopback: github.com serves ``wheel`` (with Range) at every
    release-asset URL, ``gets`` counting full downloads; any other host is
    refused and listed in ``refused`` (the test stays hermetic)."""

    def __init__(self, wheel: bytes) -> None:
        self.wheel = wheel
        self.gets = 0
        self.refused: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host != "github.com":
            self.refused.append(str(request.url))
            raise httpx.ConnectError("refused: the mirror test stays on loopback",
                                     request=request)
        if request.method == "GET" and "range" not in request.headers:
            self.gets += 1
        response = range_response(request, self.wheel)
        return httpx.Response(response.status_code, headers=response.headers,
                              content=response.content, request=request)


def make_mirror_client(host: WheelHost, **kwargs: Any) -> httpx.Client:
    """stacklock's own client with loopback over real HTTP and every other host
    answered by ``host``."""
    mounts = {"http://127.0.0.1": httpx.HTTPTransport(), "all://": host}
    return make_http_client(mounts=mounts, trust_env=False, **kwargs)


def dump_json(data: Any) -> bytes:
    return json.dumps(data, indent=1, sort_keys=True).encode() + b"\n"


RESOLVE_MIRROR = TESTS / "data" / "resolve" / "mirror"
SGL_PAGE = SGL_ROOT / "cu130" / "sgl-kernel" / "index.html"
SGL_FILE = "sgl_kernel-0.3.21+cu130-cp312-abi3-manylinux2014_x86_64.whl"


def stand_in_wheel() -> bytes:
    """A zip standing in for the sgl-kernel cu130 wheel, whose github.com release
    asset cannot be reached from here: the real METADATA (PyPI's 0.3.21 with the
    +cu130 local version), a WHEEL file, and a note saying what it is."""
    meta = (RESOLVE_MIRROR / "sgl_kernel-0.3.21-pypi.METADATA").read_bytes()
    meta = meta.replace(b"\nVersion: 0.3.21\n", b"\nVersion: 0.3.21+cu130\n", 1)
    buf = io.BytesIO()
    stamp = (2026, 1, 1, 0, 0, 0)  # fixed, so every call gives the same bytes
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in (
            ("STAND-IN.txt", b"not the real wheel: a test stand-in\n"),
            ("sgl_kernel-0.3.21+cu130.dist-info/METADATA", meta),
            ("sgl_kernel-0.3.21+cu130.dist-info/WHEEL",
             b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"),
        ):
            zf.writestr(zipfile.ZipInfo(name, date_time=stamp), data)
    return buf.getvalue()


def derived_index(tmp_path: Path, sha: str) -> str:
    """The real page plus one anchor listing the stand-in's hash (a derived file,
    written here, never stored as if it were recorded)."""
    page = SGL_PAGE.read_bytes()
    line = re.search(rb'<a href="([^"#]*' + re.escape(SGL_FILE.encode()) +
                     rb')#sha256=[0-9a-f]{64}">', page)
    assert line is not None
    extra = (b'<a href="' + line.group(1) + b"#sha256=" + sha.encode() + b'">' +
             SGL_FILE.encode() + b"</a><br>\n")
    folder = tmp_path / "derived" / "sgl-kernel"
    folder.mkdir(parents=True)
    (folder / "index.html").write_bytes(page + extra)  # the page has no </body>
    return str(tmp_path / "derived")
