"""Record tests/data/mirror/: the loopback mirror the blackwell-cu130 profiles
resolve on.

    .venv/bin/python scripts/record_mirror.py [--runs 2]

Starts the mirror of ``tests/helpers/mirror.py`` on an empty folder with a ``fill``
hook: whatever resolution asks the mirror for and it lacks is fetched from real PyPI and
stored, then served. ``/simple/<project>/`` is pypi.org's PEP 691 JSON page trimmed
to the wheels of the profile's target; a wheel's METADATA is read by range reads
into files.pythonhosted.org, whose answers are kept in a cassette. The PyTorch
role serves stand-ins (tests/data/mirror/pytorch/files.toml); the real PyPI
METADATA they start from is fetched here too. Every scenario of the mirror tests
(blackwell-cu130, blackwell-cu130-nightly, the nightly with an exclude-newer
cut-off) is resolved ``--runs`` times with empty caches (speculative prefetch may
ask for a few more files in one run than in another; the union is kept), then once
more with the fill hook off, which must give the same lock. Rewrites
tests/data/mirror/ (not its pytorch/files.toml) and its PROVENANCE.md.
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
import tomllib
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from packaging.utils import canonicalize_name, parse_wheel_filename  # noqa: E402

from stacklock.http import make_http_client  # noqa: E402
from stacklock.index.client import ACCEPT  # noqa: E402
from stacklock.index.pages import Link, parse_json_page  # noqa: E402
from stacklock.metadata.ranges import RangeReader  # noqa: E402
from stacklock.metadata.remote_zip import read_dist_info_metadata  # noqa: E402
from stacklock.profile import load_profile  # noqa: E402
from stacklock.resolve.locking import lock_profile  # noqa: E402
from tests.helpers.cassette import RecordingTransport  # noqa: E402
from tests.helpers.mirror import (  # noqa: E402
    DATA,
    RANGES,
    WheelHost,
    derived_index,
    dump_json,
    make_mirror_client,
    read_maybe_gz,
    serve_mirror,
    trim_json_page,
)
from tests.helpers.standins import PYTORCH_FILES, stand_in_wheel  # noqa: E402

PYPI = "https://pypi.org/simple"
PINNED_NIGHTLY = """\
[profile]
extends = "blackwell-cu130-nightly"
description = "blackwell-cu130-nightly as of {cutoff}"

[requirements]
exclude-newer = "{cutoff}"
"""
NIGHTLY_CUTOFF = "2026-12-01T12:00:00Z"  # between two of the stand-in nightlies


def scenario_profiles(folder: Path) -> list[tuple[str, bool]]:
    """(profile, nightly?) for every resolution the mirror must answer; the
    pinned nightly is written into ``folder`` next to copies of its parents."""
    for name in ("blackwell-cu130", "blackwell-cu130-nightly"):
        shutil.copy(ROOT / "profiles" / f"{name}.toml", folder / f"{name}.toml")
    pinned = folder / "blackwell-cu130-nightly-pinned.toml"
    pinned.write_text(PINNED_NIGHTLY.format(cutoff=NIGHTLY_CUTOFF), "utf-8")
    return [("blackwell-cu130", False), ("blackwell-cu130-nightly", True),
            (str(pinned), True)]


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
        self.target = load_profile("blackwell-cu130").target
        self.pages: dict[str, tuple[int, int]] = {}  # path -> (files before, after)

    def __call__(self, method: str, what: str, range_: str | None) -> None:
        with self.lock:  # one at a time: simple, and the fetches are few
            parts = [p for p in what.split("/") if p]
            if what.endswith(".whl"):
                self._wheel(method, what, range_)
            elif what.endswith("/") and len(parts) == 2 and parts[0] == "simple":
                self._pypi_page(parts[1])

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

    def pypi_metadata(self, filename: str) -> bytes:
        """The METADATA of PyPI's wheel ``filename``, read by range reads (a
        stand-in's base; not part of the cassette)."""
        self._fetch_page(parse_wheel_filename(filename)[0])
        reader = RangeReader(self.http, self.links[filename].url,
                             on_bytes=lambda n: None)
        if not reader.open_tail(65536):
            raise SystemExit(f"{filename}: the file host ignores Range")
        return read_dist_info_metadata(reader, filename)

    def _wheel(self, method: str, filename: str, range_: str | None) -> None:
        if filename not in self.links:  # its page was stored by an earlier run
            self._fetch_page(parse_wheel_filename(filename)[0])
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
    body gzip-compressed (``<sha256 of the body>.gz``, as tests/helpers/cassette.py
    does)."""
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


def _resolve(mirror: Any, scenarios: list[tuple[str, bool]],
             work: Path, tag: str) -> list[bytes]:
    """Lock every scenario on ``mirror`` with empty caches; the locks' bytes."""
    out = []
    for i, (profile, nightly) in enumerate(scenarios):
        urls = mirror.index_urls(nightly=nightly, sgl_page="sgl")
        lock = work / f"{tag}-{i}.toml"
        # the fill hook fetches one file at a time: a read may wait long
        with make_mirror_client(WheelHost(), timeout=600) as http, \
                tempfile.TemporaryDirectory() as cache:
            lock_profile(profile, output=lock, index_urls=urls, http=http,
                         cache_dir=Path(cache), check=False)
        out.append(lock.read_bytes())
    return out


def _compress_pages(root: Path) -> None:
    for path in sorted(root.rglob("index.json")):
        path.with_name("index.json.gz").write_bytes(
            gzip.compress(path.read_bytes(), mtime=0))
        path.unlink()


def _record_bases(recorder: Recorder) -> list[str]:
    """PyPI's METADATA of every wheel files.toml names as a stand-in's base."""
    table = tomllib.loads((PYTORCH_FILES / "files.toml").read_text("utf-8"))
    bases = sorted({entry["base"] for entry in table["file"]})
    for base in bases:
        filename = base.removesuffix(".METADATA")
        _write(PYTORCH_FILES / base, recorder.pypi_metadata(filename))
    return bases


def record(runs: int, *, resume: bool = False) -> str:
    if not resume:
        for sub in ("simple", RANGES):
            shutil.rmtree(DATA / sub, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix="record-mirror-"))
    sha = hashlib.sha256(stand_in_wheel()).hexdigest()
    derived = Path(derived_index(work, sha))
    scenarios = scenario_profiles(work)
    recorder = Recorder(DATA)
    bases = _record_bases(recorder)
    for run in range(runs):
        with serve_mirror(fill=recorder, sgl_root=derived) as mirror:
            _resolve(mirror, scenarios, work, f"run{run}")
    _compress_pages(DATA)
    _pack_ranges(DATA / RANGES)
    with serve_mirror(sgl_root=derived) as mirror:
        replay = _resolve(mirror, scenarios, work, "replay")
    recorder.close()
    shutil.rmtree(work)
    counts = [lock.count(b"[[packages]]") for lock in replay]
    if not all(counts):
        raise SystemExit("a replay locked nothing")
    return _provenance(recorder, counts, bases)


def _provenance(recorder: Recorder, counts: list[int], bases: list[str]) -> str:
    files = [p for p in DATA.rglob("*") if p.is_file() and p.name != "PROVENANCE.md"]
    size = sum(p.stat().st_size for p in files)
    cassette = json.loads((DATA / RANGES / "cassette.json").read_text("utf-8"))
    metas = {e["url"] for e in cassette["entries"]}
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")
    rows = "\n".join(f"| `{page}/` | {before} | {after} |"
                     for page, (before, after) in sorted(recorder.pages.items()))
    packages = ", ".join(map(str, counts))
    text = PROVENANCE.format(when=when, pages=len(recorder.pages),
                             metas=len(metas), size=size // 1024,
                             packages=packages, rows=rows, cutoff=NIGHTLY_CUTOFF,
                             bases="\n".join(f"  - `{b}`" for b in bases))
    (DATA / "PROVENANCE.md").write_text(text, encoding="utf-8")
    return (f"{len(recorder.pages)} pages, {len(metas)} wheels read by range, "
            f"{size // 1024} KiB; the replays locked {packages} packages\n")


PROVENANCE = """\
# tests/data/mirror: a loopback mirror for the blackwell-cu130 profiles

Recorded {when} by `scripts/record_mirror.py` from https://pypi.org/simple (PEP 691
JSON) and files.pythonhosted.org, while stacklock resolved, against the mirror
(`tests/helpers/mirror.py`), `profiles/blackwell-cu130.toml`,
`profiles/blackwell-cu130-nightly.toml` and that nightly profile with
`exclude-newer = "{cutoff}"`, fetching only what resolution asked for: {pages}
pages, {metas} wheels read by range, {size} KiB on disk; the replays with nothing
fetched locked {packages} packages.

What was changed, all by the script, nothing typed by hand:

- **Trimmed**: every page keeps only the wheels whose tags fit the profiles'
  target (CPython 3.12, manylinux_2_28 x86_64; `stacklock.target.Target.tags()`);
  sdists and other platforms are dropped. `versions` keeps the versions that still
  have a file. All other fields (sha256, size, upload-time, requires-python,
  yanked, core-metadata) are PyPI's, unchanged.
- **PyPI role** (`simple/<project>/index.json.gz`):
  each file's `url` is rewritten to `../../files/<filename>`, relative, so the
  mirror serves on any port (as bandersnatch-style mirrors do).
- **METADATA**: PyPI's pages here declare no PEP 658 files, so stacklock reads
  METADATA with HTTP range reads into each wheel (`stacklock/metadata/remote_zip.py`).
  `ranges/` is a tests/helpers/cassette.py cassette of files.pythonhosted.org's real
  answers to those reads (recorded with `RecordingTransport` while the mirror
  forwarded them); the mirror answers `GET /files/<wheel>` with the same `Range`
  from it, by filename. Whole wheels are never served. In each 64 KiB suffix
  read, the bytes before the zip's central directory (compressed file data no
  METADATA reader looks at) are set to zero, except the `*.dist-info/METADATA`
  member when it lies in the tail (`blank_unread` in the script); the central
  directory, the end records and the METADATA bytes are PyPI's. All bodies and
  pages are stored gzipped.
- **PyTorch index role** (`pytorch/`): **stand-ins**, not recorded files. No
  page of download.pytorch.org/whl/cu130 or /whl/nightly/cu130 is recorded
  anywhere (tests/data/real/PROVENANCE.md section 1), so `pytorch/files.toml`
  declares the files (names, channel, upload times, which release anchors carry
  `#sha256=`) and tests/helpers/pytorch_index.py writes the pages in the format
  pytorch/test-infra's manage_v2.py generates (absolute hrefs to a second host
  with `%2B`, no `#sha256=` on nightlies, `data-dist-info-metadata` /
  `data-core-metadata`, `data-upload-time`, `<!--TIMESTAMP-->`, 403 for a
  missing project). Each stand-in wheel (tests/helpers/standins.py) is a small zip with
  a `STAND-IN.txt`; its METADATA is the real PyPI METADATA named in its `base`,
  recorded here by the script from files.pythonhosted.org, with Name and
  Version set from the file name and the `replace`d Requires-Dist lines
  rewritten (a nightly torch requires `pytorch-triton`; a PyTorch-index
  torchvision or torchaudio pins its torch exactly):
{bases}
- **sgl-kernel and flashinfer**: not stored here; the mirror serves
  `tests/data/real/sgl-project-whl-gh-pages/` and
  `tests/data/real/flashinfer-ai-whl-cu130/` unchanged at `/sgl/` and
  `/flashinfer/`. Their hrefs point to github.com release assets, which cannot be
  reached from here; the tests answer them with stand-ins
  (tests/helpers/standins.py).
  flashinfer's pages list one sha256 per file, which the lock takes from the
  page; the stand-in is read only for METADATA. The sgl-kernel page lists the
  chosen file under several sha256 values, none the stand-in's: served the real
  page unchanged, resolution fails naming them; the recording and the passing
  tests serve a copy of the real page plus one anchor carrying the stand-in's
  sha256 (written to a temporary folder by tests/helpers/mirror.py's
  `derived_index`, never stored), so the hash is settled by download.

| page | files on PyPI | files kept |
|---|---|---|
{rows}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2,
                        help="resolutions with empty caches (default 2)")
    parser.add_argument("--resume", action="store_true",
                        help="keep what an interrupted recording fetched")
    args = parser.parse_args(argv)
    sys.stdout.write(record(args.runs, resume=args.resume))
    return 0


if __name__ == "__main__":
    sys.exit(main())
