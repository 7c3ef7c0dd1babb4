"""Record tests/data/mirror/: the loopback mirror that blackwell-cu130 resolves on.

    .venv/bin/python scripts/record_mirror.py [--runs 2]

Starts the mirror of ``tests/mirror.py`` on an empty folder with a ``fill`` hook:
whatever resolution asks the mirror for and it lacks is fetched from real PyPI and
stored, then served. ``/simple/<project>/`` is pypi.org's PEP 691 JSON page trimmed
to the wheels of the profile's target; ``/whl/cu130/<project>/`` is PyPI's torch,
torchvision or torchaudio page trimmed the same way and written in
download.pytorch.org's format; ``<wheel>.metadata`` is the wheel's METADATA read
by ``stacklock.metadata.MetadataFetcher`` from files.pythonhosted.org (the PEP 658
file, checked against the page's sha256). The profile is resolved ``--runs`` times
with empty caches (speculative prefetch may ask for a few more files in one run
than in another; the union is kept), then once more with the fill hook off, which
must give the same lock. Rewrites tests/data/mirror/ and its PROVENANCE.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import shutil
import struct
import sys
import tempfile
import threading
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name, parse_wheel_filename  # noqa: E402
from packaging.version import Version  # noqa: E402

from stacklock.http import make_http_client  # noqa: E402
from stacklock.index.client import ACCEPT  # noqa: E402
from stacklock.index.pages import Link, parse_json_page  # noqa: E402
from stacklock.metadata import MetadataFetcher  # noqa: E402
from stacklock.profile import load_profile  # noqa: E402
from stacklock.resolve.locking import lock_profile  # noqa: E402
from tests.helpers.cassette import RecordingTransport  # noqa: E402
from tests.helpers.mirror import (  # noqa: E402  # noqa: E402
    DATA,
    PYTORCH_PREFIX,
    PYTORCH_PROJECTS,
    RANGES,
    WheelHost,
    derived_index,
    dump_json,
    make_mirror_client,
    read_maybe_gz,
    render_pytorch_page,
    serve_mirror,
    stand_in_wheel,
    trim_json_page,
)

PROFILE = "blackwell-cu130"
PYPI = "https://pypi.org/simple"


class Recorder:
    """The mirror's ``fill`` hook: fetch a missing page from PyPI, or forward a
    wheel read (method + Range) to files.pythonhosted.org and record the answer
    in the mirror's range cassette."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.http = make_http_client()
        self.files = make_http_client(
            transport=RecordingTransport(root / RANGES, httpx.HTTPTransport(retries=2)))
        self.links: dict[str, Link] = {}  # wheel filename -> its real PyPI link
        self.lock = threading.Lock()
        self.target = load_profile(PROFILE).target
        self.stamp = int(time.time())
        self.pages: dict[str, tuple[int, int]] = {}  # path -> (files before, after)
        self.decide = MetadataFetcher(self.http, cache_dir=Path(tempfile.mkdtemp()))
        self.cu130_torch: list[Version] = []

    def __call__(self, method: str, what: str, range_: str | None) -> None:
        with self.lock:  # one at a time: simple, and the fetches are few
            parts = [p for p in what.split("/") if p]
            if what.endswith(".whl"):
                self._wheel(method, what, range_)
            elif what.endswith("/") and len(parts) == 2 and parts[0] == "simple":
                self._pypi_page(parts[1])
            elif (what.endswith("/") and what.startswith(PYTORCH_PREFIX)
                  and len(parts) == 3 and parts[2] in PYTORCH_PROJECTS):
                self._pytorch_page(parts[2])

    def _fetch_page(self, project: str) -> dict | None:
        url = f"{PYPI}/{canonicalize_name(project)}/"
        response = self.http.get(url, headers={"Accept": ACCEPT})
        if response.status_code == 404:
            return None
        response.raise_for_status()
        for link in parse_json_page(response.content, url).links:
            self.links[link.filename] = link
        return json.loads(response.content)

    def _pypi_page(self, project: str) -> None:
        page = self._fetch_page(project)
        if page is None:
            return
        trimmed = trim_json_page(page, self.target, "../../files/")
        self.pages[f"simple/{project}"] = (len(page["files"]), len(trimmed["files"]))
        _write(self.root / "simple" / project / "index.json", dump_json(trimmed))

    def _pytorch_page(self, project: str) -> None:
        page = self._fetch_page(project)
        if page is None:
            return
        trimmed = trim_json_page(page, self.target, PYTORCH_PREFIX)
        keep = self._is_cu130_torch if project == "torch" else self._fits_cu130_torch
        trimmed["files"] = [f for f in trimmed["files"] if keep(f["filename"])]
        self.pages[f"whl/cu130/{project}"] = (len(page["files"]),
                                              len(trimmed["files"]))
        body = render_pytorch_page(project, trimmed["files"], self.stamp)
        _write(self.root / PYTORCH_PREFIX.strip("/") / project / "index.html", body)

    def _requirements_on(self, filename: str, name: str) -> list[Requirement]:
        """``filename``'s requirements on ``name`` that apply to the target,
        from its METADATA on PyPI (read to decide, not stored)."""
        env = {**self.target.marker_environment(), "extra": ""}
        meta = self.decide.get(self.links[filename])
        return [r for r in meta.requires_dist if canonicalize_name(r.name) == name
                and (r.marker is None or r.marker.evaluate(env))]

    def _is_cu130_torch(self, filename: str) -> bool:
        """A CUDA 13.0 build: torch >= 2.11 pins ``cuda-toolkit==13.0.x``
        (2.15.0 pins 13.2.2 and belongs on a cu132 index)."""
        for req in self._requirements_on(filename, "cuda-toolkit"):
            pins = [Version(s.version) for s in req.specifier if s.operator == "=="]
            if pins and all(v.release[:2] == (13, 0) for v in pins):
                self.cu130_torch.append(parse_wheel_filename(filename)[1])
                return True
        return False

    def _fits_cu130_torch(self, filename: str) -> bool:
        """torchvision/torchaudio: kept when a kept torch satisfies it."""
        if not self.cu130_torch:
            self._pytorch_page("torch")
        return all(any(r.specifier.contains(v, prereleases=True)
                       for v in self.cu130_torch)
                   for r in self._requirements_on(filename, "torch"))

    def _wheel(self, method: str, filename: str, range_: str | None) -> None:
        link = self.links.get(filename)
        if link is not None:
            headers = {"Range": range_} if range_ else {}
            self.files.request(method, link.url, headers=headers)

    def close(self) -> None:
        self.http.close()
        self.files.close()


class _Sparse(io.RawIOBase):
    """A ``total``-byte file of which only ``data`` at ``start`` is known (zeros
    elsewhere): enough for zipfile to read a central directory inside ``data``."""

    def __init__(self, data: bytes, start: int, total: int) -> None:
        self.data, self.start, self.total, self.pos = data, start, total, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.total}[whence]
        self.pos = base + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buffer: Any) -> int:
        n = max(0, min(len(buffer), self.total - self.pos))
        out = bytearray(n)
        lo = max(self.pos, self.start)
        hi = min(self.pos + n, self.start + len(self.data))
        if lo < hi:
            chunk = self.data[lo - self.start:hi - self.start]
            out[lo - self.pos:hi - self.pos] = chunk
        buffer[:n] = out
        self.pos += n
        return n


def blank_unread(body: bytes, start: int, total: int) -> bytes:
    """The tail of a wheel with the bytes a METADATA reader never looks at set to
    zero: everything before the central directory, except the dist-info METADATA
    member when it lies in the tail. Those bytes are compressed file data, which
    gzip cannot shrink; the directory, the EOCD records and METADATA stay real."""
    eocd = body.rfind(b"PK\x05\x06")
    if eocd < 0:
        return body
    (cd_offset,) = struct.unpack_from("<I", body, eocd + 16)
    if cd_offset == 0xFFFFFFFF:  # ZIP64: the locator just before the EOCD
        (eocd64,) = struct.unpack_from("<Q", body, eocd - 20 + 8)
        if eocd64 < start:
            return body
        (cd_offset,) = struct.unpack_from("<Q", body, eocd64 - start + 48)
    if cd_offset <= start:
        return body  # the tail is all directory (torch): nothing to blank
    keep = cd_offset
    with zipfile.ZipFile(_Sparse(body, start, total)) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if (len(parts) == 2 and parts[0].endswith(".dist-info")
                    and parts[1] == "METADATA" and info.header_offset >= start):
                keep = min(keep, info.header_offset)
    return bytes(keep - start) + body[keep - start:]


def _pack_ranges(root: Path) -> None:
    """Apply :func:`blank_unread` to every recorded suffix read and store every
    body gzip-compressed (``<sha256 of the body>.gz``, as tests/cassette.py does)."""
    path = root / "cassette.json"
    data = json.loads(path.read_text("utf-8"))
    for entry in data["entries"]:
        old = root / "bodies" / entry["body"]
        body = read_maybe_gz(old)
        assert body is not None
        new = body
        if (entry["range"] or "").startswith("bytes=-") and entry["status"] == 206:
            first, _, total = dict(entry["headers"])["content-range"].partition("-")
            new = blank_unread(body, int(first.split()[-1]),
                               int(total.rpartition("/")[2]))
        digest = hashlib.sha256(new).hexdigest()
        packed = root / "bodies" / f"{digest}.gz"
        if not packed.exists():
            _write(packed, gzip.compress(new, mtime=0))
        if digest != entry["body"]:
            (root / "bodies" / f"{entry['body']}.gz").unlink(missing_ok=True)
        old.unlink(missing_ok=True)
        entry["body"] = digest
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", "utf-8")


def _write(path: Path, body: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(body)
    tmp.replace(path)


def _resolve(index_urls: dict[str, str], wheel: bytes, out: Path) -> bytes:
    host = WheelHost(wheel)
    with make_mirror_client(host) as http, tempfile.TemporaryDirectory() as cache:
        lock_profile(PROFILE, output=out, index_urls=index_urls, http=http,
                     cache_dir=Path(cache))
    return out.read_bytes()


def _compress_pages(root: Path) -> None:
    for path in sorted(root.rglob("index.json")):
        path.with_name("index.json.gz").write_bytes(
            gzip.compress(path.read_bytes(), mtime=0))
        path.unlink()


def record(runs: int) -> str:
    for sub in ("simple", RANGES, "whl"):
        shutil.rmtree(DATA / sub, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix="record-mirror-"))
    wheel = stand_in_wheel()  # zip timestamps: build it once
    sha = hashlib.sha256(wheel).hexdigest()
    derived = Path(derived_index(work, sha))
    recorder = Recorder(DATA)
    locks = []
    for run in range(runs):
        with serve_mirror(fill=recorder, sgl_root=derived) as mirror:
            urls = mirror.index_urls(sgl_page="sgl")
            locks.append(_resolve(urls, wheel, work / f"run{run}.toml"))
    _compress_pages(DATA)
    _pack_ranges(DATA / RANGES)
    with serve_mirror(sgl_root=derived) as mirror:
        replay = _resolve(mirror.index_urls(sgl_page="sgl"), wheel,
                          work / "replay.toml")
    recorder.close()
    shutil.rmtree(work)
    if not replay.count(b"[[packages]]"):
        raise SystemExit("the replay locked nothing")
    return _provenance(recorder, replay.count(b"[[packages]]"))


def _provenance(recorder: Recorder, packages: int) -> str:
    files = [p for p in DATA.rglob("*") if p.is_file() and p.name != "PROVENANCE.md"]
    size = sum(p.stat().st_size for p in files)
    cassette = json.loads((DATA / RANGES / "cassette.json").read_text("utf-8"))
    metas = {e["url"] for e in cassette["entries"]}
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")
    torches = recorder.cu130_torch
    rows = "\n".join(f"| `{page}/` | {before} | {after} |"
                     for page, (before, after) in sorted(recorder.pages.items()))
    text = PROVENANCE.format(when=when, pages=len(recorder.pages),
                             metas=len(metas), size=size // 1024,
                             packages=packages, rows=rows,
                             torches=", ".join(map(str, sorted(set(torches)))))
    (DATA / "PROVENANCE.md").write_text(text, encoding="utf-8")
    return (f"{len(recorder.pages)} pages, {len(metas)} wheels read by range, "
            f"{size // 1024} KiB; replay locked {packages} packages\n")


PROVENANCE = """\
# tests/data/mirror: a loopback mirror for blackwell-cu130

Recorded {when} by `scripts/record_mirror.py` from https://pypi.org/simple (PEP 691
JSON) and files.pythonhosted.org, while stacklock resolved
`profiles/blackwell-cu130.toml` against the mirror (`tests/mirror.py`), fetching
only what resolution asked for: {pages} pages, {metas} wheels read by range, {size} KiB
on disk; the replay with nothing fetched locked {packages} packages.

What was changed, all by the script, nothing typed by hand:

- **Trimmed**: every page keeps only the wheels whose tags fit the profile's
  target (CPython 3.12, manylinux_2_28 x86_64; `stacklock.target.Target.tags()`);
  sdists and other platforms are dropped. `versions` keeps the versions that still
  have a file. All other fields (sha256, size, upload-time, requires-python,
  yanked, core-metadata) are PyPI's, unchanged.
- **PyPI role** (`simple/<project>/index.json.gz`):
  each file's `url` is rewritten to `../../files/<filename>`, relative, so the
  mirror serves on any port (as bandersnatch-style mirrors do).
- **PyTorch index role** (`whl/cu130/<project>/index.html`): PyPI's torch,
  torchvision and torchaudio files, kept as a cu130 index would hold them: torch
  releases whose METADATA pins `cuda-toolkit==13.0.*` (the CUDA 13.0 builds,
  2.11 onwards; a release pinning another CUDA minor would live on another
  index), and the torchvision/torchaudio files whose `torch` requirement one of
  those satisfies (their METADATA is read from PyPI to decide, and stored only
  if resolution reads it). Written in download.pytorch.org's page format
  (tests/data/real/PROVENANCE.md section 1): root-relative hrefs
  `/whl/cu130/<file>` with `%2B`, PyPI's real `#sha256=` kept
  (download.pytorch.org's stable pages carry it; download-hashing is exercised by
  sgl-kernel instead), no metadata attributes (PyPI gave no METADATA sha256 to
  copy), no `data-requires-python`, a `<!--TIMESTAMP-->` of the recording time.
  These are stable builds, not nightlies: no cu130 nightly page is recorded
  anywhere (tests/data/pytorch/). Kept torch versions: {torches}.
- **METADATA**: PyPI's pages here declare no PEP 658 files, so stacklock reads
  METADATA with HTTP range reads into each wheel (`stacklock/metadata/remote_zip.py`).
  `ranges/` is a tests/cassette.py cassette of files.pythonhosted.org's real
  answers to those reads (recorded with `RecordingTransport` while the mirror
  forwarded them); the mirror answers `GET /files/<wheel>` and
  `GET /whl/cu130/<wheel>` with the same `Range` from it, by filename. Whole
  wheels are never served. In each 64 KiB suffix read, the bytes before the
  zip's central directory (compressed file data no METADATA reader looks at)
  are set to zero, except the `*.dist-info/METADATA` member when it lies in the
  tail (`blank_unread` in the script); the central directory, the end records
  and the METADATA bytes are PyPI's. All bodies and pages are stored gzipped.
- **sgl-kernel**: not stored here; the mirror serves
  `tests/data/real/sgl-project-whl-gh-pages/` unchanged at `/sgl/`. Its hrefs point
  to github.com release assets, which cannot be reached from here; the test
  answers them with a **stand-in** wheel: a small zip with a `STAND-IN.txt` and
  the METADATA of PyPI's sgl-kernel 0.3.21 (tests/data/resolve/mirror/, labelled
  there) with `Version: 0.3.21+cu130`. It is not the real cu130 wheel and its
  sha256 is none of those the real page lists: served the real page unchanged,
  resolution fails naming them; the recording and the passing test serve a copy
  of the real page plus one anchor carrying the stand-in's sha256 (written to a
  temporary folder by tests/test_resolve_indexes.py's `_derived_index`, never
  stored), so the hash is settled by download.

| page | files on PyPI | files kept |
|---|---|---|
{rows}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2,
                        help="resolutions with empty caches (default 2)")
    args = parser.parse_args(argv)
    sys.stdout.write(record(args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
