"""A loopback mirror of the four indexes of profiles/blackwell-cu130.toml and
blackwell-cu130-nightly.toml, in each index's real format.

Two ThreadingHTTPServers. The *index host* serves, on one port:

- ``/simple/<project>/``: the PyPI role, real PEP 691 JSON pages of pypi.org trimmed
  to the wheels the target can install (``index.json.gz`` in
  tests/data/mirror/simple/), file URLs made relative (``../../files/<name>``),
  the way mirrors such as bandersnatch serve them;
- ``/files/<wheel>``: only the range reads stacklock makes for METADATA, answered
  from a cassette of PyPI's real answers (:class:`Ranges`); never a whole wheel;
- ``/whl/cu130/<project>/`` and ``/whl/nightly/cu130/<project>/``: the PyTorch
  index role in download.pytorch.org's format (:func:`render_pytorch_page`),
  listing the stand-ins of tests/data/mirror/pytorch/files.toml with absolute
  hrefs to the *wheel host*, as the real pages point to download-r2.pytorch.org;
  a project it does not have is answered 403 with S3's AccessDenied body, as the
  real index does;
- ``/sgl/<path>``: tests/data/real/sgl-project-whl-gh-pages/ byte for byte (or a
  derived copy, ``sgl_root``);
- ``/flashinfer/<path>``: tests/data/real/flashinfer-ai-whl-cu130/ byte for byte;
- ``/loop/<path>``: a redirect to itself, for the redirect-loop error.

The *wheel host* (second port) serves each PyTorch stand-in whole (``Range``
honoured) and its PEP 658 ``<wheel>.metadata`` file. github.com, where the sgl-kernel
and flashinfer pages link, cannot be reached from here: :func:`make_mirror_client`
routes it to :class:`WheelHost`, which serves the stand-ins of
tests/helpers/standins.py, and refuses every other host that is not loopback.

``scripts/record_mirror.py`` builds tests/data/mirror/ with the functions below and
a ``fill`` hook that fetches what the mirror lacks from real PyPI.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
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
from tests.helpers.pytorch_index import ACCESS_DENIED, pytorch_page
from tests.helpers.ranges import answer_range, range_response
from tests.helpers.standins import SGL_FILE, github_wheel, pytorch_files

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data" / "mirror"
SGL_ROOT = TESTS / "data" / "real" / "sgl-project-whl-gh-pages"
FLASHINFER_ROOT = TESTS / "data" / "real" / "flashinfer-ai-whl-cu130"
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
    elif rel.startswith("flashinfer/"):
        base, folder = FLASHINFER_ROOT, rel[len("flashinfer/"):]
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
        if path.startswith("/loop/"):
            self._send(302, [("location", path), ("content-length", "0")], b"")
            return
        if path.startswith("/whl/"):
            page = pytorch_page(path, server.wheel_host, as_of=server.as_of)
            if page is None:
                self._send(403, [("content-type", "application/xml"),
                                 ("content-length", str(len(ACCESS_DENIED)))],
                           ACCESS_DENIED)
                return
            self._send(200, [("content-type", "text/html"),
                             ("content-length", str(len(page)))], page)
            return
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


class _WheelHostHandler(_Handler):
    """The second host: PyTorch's stand-in wheels and their METADATA files."""

    def _answer(self) -> None:
        path = unquote(urlsplit(self.path).path)
        self.server.requested.append(path)
        by_path = {f"/whl/{f.channel}/{f.filename}": f for f in pytorch_files()}
        found = by_path.get(path.removesuffix(".metadata"))
        if found is None:
            self._send(403, [("content-length", str(len(ACCESS_DENIED)))],
                       ACCESS_DENIED)
        elif path.endswith(".metadata"):
            self._send(200, [("content-length", str(len(found.metadata)))],
                       found.metadata)
        else:
            if self.command == "GET" and not self.headers.get("range"):
                self.server.downloads.append(found.filename)
            self._send(*answer_range(found.wheel, self.command,
                                      self.headers.get("range")))


class _MirrorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, fill: Fill | None, sgl_root: Path,
                 handler: type[_Handler] = _Handler) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.root, self.fill, self.sgl_root = root, fill, sgl_root
        self.ranges = Ranges(root / RANGES)
        self.requested: list[str] = []
        self.downloads: list[str] = []  # whole wheels served (wheel host)
        self.wheel_host = ""
        self.as_of: str | None = None  # the PyTorch pages as they were then


class Mirror:
    """A running mirror: ``url`` is the index host, ``wheel_url`` the wheel host;
    ``requested`` the paths asked of the index host, ``wheel_requests`` those
    asked of the wheel host, ``downloads`` the whole wheels it served."""

    def __init__(self, server: _MirrorServer, wheels: _MirrorServer) -> None:
        self._server, self._wheels = server, wheels
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self.wheel_url = f"http://127.0.0.1:{wheels.server_address[1]}"

    @property
    def requested(self) -> list[str]:
        return self._server.requested

    @property
    def downloads(self) -> list[str]:
        return self._wheels.downloads

    @property
    def wheel_requests(self) -> list[str]:
        return self._wheels.requested

    def index_urls(self, *, nightly: bool = False,
                   sgl_page: str = "sgl/cu130") -> dict[str, str]:
        """``--index NAME=URL`` for every index of blackwell-cu130 (or of
        blackwell-cu130-nightly)."""
        torch = ("pytorch-nightly-cu130", "nightly/cu130") if nightly else (
            "pytorch-cu130", "cu130")
        return {"pypi": f"{self.url}/simple",
                torch[0]: f"{self.url}/whl/{torch[1]}",
                "sgl-kernel-cu130": f"{self.url}/{sgl_page}",
                "flashinfer-cu130": f"{self.url}/flashinfer/cu130"}


@contextmanager
def serve_mirror(root: Path = DATA, fill: Fill | None = None,
                 sgl_root: Path = SGL_ROOT, as_of: str | None = None
                 ) -> Iterator[Mirror]:
    """Serve the mirror; ``sgl_root`` replaces the real sgl-kernel pages (a
    derived page), ``fill(path)`` may create what is missing before a 404;
    ``as_of`` (RFC 3339) serves the PyTorch pages as they were at that moment:
    only the files uploaded by then."""
    wheels = _MirrorServer(root, None, sgl_root, _WheelHostHandler)
    server = _MirrorServer(root, fill, sgl_root)
    server.as_of = as_of
    server.wheel_host = f"http://127.0.0.1:{wheels.server_address[1]}"
    threads = [threading.Thread(target=s.serve_forever, daemon=True)
               for s in (server, wheels)]
    for thread in threads:
        thread.start()
    try:
        yield Mirror(server, wheels)
    finally:
        for s in (server, wheels):
            s.shutdown()
            s.server_close()
        for thread in threads:
            thread.join()


class WheelHost(httpx.BaseTransport):
    """Every host but loopback: github.com serves the stand-in of
    :func:`tests.helpers.standins.github_wheel` at each release-asset URL (with Range),
    ``gets`` listing the full downloads; any other host or file is refused and
    listed in ``refused`` (the test stays hermetic)."""

    def __init__(self) -> None:
        self.gets: list[str] = []
        self.refused: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        filename = unquote(request.url.path.rsplit("/", 1)[-1])
        body = github_wheel(filename) if request.url.host == "github.com" else None
        if body is None:
            self.refused.append(str(request.url))
            raise httpx.ConnectError("refused: the mirror test stays on loopback",
                                     request=request)
        if request.method == "GET" and "range" not in request.headers:
            self.gets.append(filename)
        response = range_response(request, body)
        return httpx.Response(response.status_code, headers=response.headers,
                              content=response.content, request=request)


class _Loopback(httpx.BaseTransport):
    """Loopback over real HTTP, every other host to ``host``."""

    def __init__(self, host: WheelHost) -> None:
        self._real = httpx.HTTPTransport()
        self._host = host

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "127.0.0.1":
            return self._real.handle_request(request)
        return self._host.handle_request(request)

    def close(self) -> None:
        self._real.close()


def make_mirror_client(host: WheelHost, **kwargs: Any) -> httpx.Client:
    """stacklock's own client with loopback over real HTTP and every other host
    answered by ``host``."""
    return make_http_client(transport=_Loopback(host), **kwargs)


def dump_json(data: Any) -> bytes:
    return json.dumps(data, indent=1, sort_keys=True).encode() + b"\n"


SGL_PAGE = SGL_ROOT / "cu130" / "sgl-kernel" / "index.html"


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


def resolve_on_mirror(monkeypatch: Any, tmp_path: Path, profile: str,
                      urls: dict[str, str], host: WheelHost,
                      *extra: str, verb: str = "resolve") -> tuple[int, str, str]:
    """``stacklock resolve PROFILE --index NAME=URL ...`` (or ``verb``, e.g.
    ``update``) through the CLI, every other host answered by ``host``: exit
    code, stdout and stderr."""
    import contextlib
    import io

    from stacklock import cli

    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("stacklock.resolve.locking.client_for",
                        lambda profile: make_mirror_client(host))
    # --no-check: the native check reads whole wheels, which the mirror serves
    # only as stand-ins or recorded range reads
    argv = [verb, profile, "--no-check", *extra]
    for name, url in urls.items():
        argv += ["--index", f"{name}={url}"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()
