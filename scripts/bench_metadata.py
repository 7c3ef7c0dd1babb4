"""Measure (and record) how few bytes stacklock reads to get a wheel's METADATA,
and a patched package's files.

    python scripts/bench_metadata.py              # table: size, bytes read, cold/warm
    python scripts/bench_metadata.py --record tests/data/metadata

For each wheel below, the newest release on PyPI that fits the pattern is read with
:class:`stacklock.metadata.MetadataFetcher`, cold (an empty cache) then warm (the same
cache, so 0 bytes). ``--record`` also writes every range response the cold read got
(Content-Range plus body) and the METADATA file into ``DIR/<wheel filename>/``,
the fixtures that tests/integration/test_metadata.py serves back through
httpx.MockTransport.

Then, for each patched package of a committed lock (``--patched-lock``, default
locks/pylock.pypi-cu130-sm120.toml), what resolve reads of its wheel to apply the
patches: :func:`stacklock.metadata.members.read_wheel_files` with the files the
lock's patch records change, cold (an empty artifact store), as
``resolve.patching`` calls it; the wheel's size is what a tool without range reads
(uv, pip) downloads to get at those files.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
from packaging.utils import parse_wheel_filename

from stacklock.index.pages import Link, parse_json_page
from stacklock.lock import load_lock, wheel_sha256
from stacklock.metadata import MetadataFetcher
from stacklock.metadata.members import read_wheel_files
from stacklock.store import ArtifactStore

ROOT = Path(__file__).resolve().parent.parent
SIMPLE = "https://pypi.org/simple"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"

# (project, filename pattern): the newest final release whose wheel matches.
WHEELS = [
    ("torch", r"-cp312-cp312-manylinux_[0-9_]+_x86_64\.whl$"),
    ("numpy", r"-cp312-cp312-manylinux_[0-9a-z_.]*x86_64\.whl$"),
    ("sglang", r"-py3-none-any\.whl$"),
    ("flashinfer-python", r"-py3-none-any\.whl$"),
    ("six", r"-py2\.py3-none-any\.whl$"),
]
RECORD = ("torch", "numpy", "six")  # what --record keeps: big, medium, tiny


def find_wheel(http: httpx.Client, project: str, pattern: str) -> Link:
    """The newest non-prerelease wheel of ``project`` on PyPI matching ``pattern``."""
    url = f"{SIMPLE}/{project}/"
    response = http.get(url, headers={"Accept": JSON_ACCEPT})
    response.raise_for_status()
    links = [
        link
        for link in parse_json_page(response.content, url).links
        if link.is_wheel and re.search(pattern, link.filename) and not link.yanked
    ]
    finals = [
        (parse_wheel_filename(link.filename)[1], link)
        for link in links
        if not parse_wheel_filename(link.filename)[1].is_prerelease
    ]
    if not finals:
        raise SystemExit(f"no wheel of {project} matches {pattern}")
    return max(finals, key=lambda pair: pair[0])[1]


class Recorder(httpx.BaseTransport):
    """Passes requests through and keeps every 206 answer (range, body)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.ranges: list[tuple[str, bytes]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if response.status_code != 206:
            return response
        body = response.read()
        self.ranges.append((response.headers["content-range"], body))
        headers = [
            (k, v) for k, v in response.headers.items() if k != "content-encoding"
        ]
        return httpx.Response(206, headers=headers, content=body, request=request)


def record(link: Link, dest: Path) -> int:
    """Read ``link``'s METADATA cold and write what came back under ``dest``."""
    recorder = Recorder(httpx.HTTPTransport(retries=2))
    folder = dest / link.filename
    folder.mkdir(parents=True, exist_ok=True)
    with (
        httpx.Client(transport=recorder, timeout=60) as http,
        tempfile.TemporaryDirectory() as cache,
    ):
        fetcher = MetadataFetcher(http, cache_dir=Path(cache))
        meta = fetcher.get(link)
    segments = []
    for content_range, body in recorder.ranges:
        first, last = re.findall(r"\d+", content_range)[:2]
        name = f"{first}-{last}.bin"
        (folder / name).write_bytes(body)
        segments.append({"content-range": content_range, "file": name})
    (folder / "METADATA").write_bytes(meta.raw)
    info = {
        "url": link.url,
        "filename": link.filename,
        "sha256": link.sha256,
        "size": link.size,
        "recorded": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "segments": segments,
    }
    (folder / "ranges.json").write_text(json.dumps(info, indent=2) + "\n")
    return fetcher.bytes_read


@dataclass(frozen=True, kw_only=True)
class Row:
    wheel: str
    size: int
    read: int
    warm_read: int
    cold_s: float
    warm_s: float


def bench(links: list[Link]) -> list[Row]:
    """Read each wheel's METADATA cold, then warm from the same cache."""
    rows = []
    with httpx.Client(timeout=60, follow_redirects=True) as http:
        for link in links:
            with tempfile.TemporaryDirectory() as cache:
                cold = MetadataFetcher(http, cache_dir=Path(cache))
                start = time.perf_counter()
                cold.get(link)
                cold_s = time.perf_counter() - start
                warm = MetadataFetcher(http, cache_dir=Path(cache))
                start = time.perf_counter()
                warm.get(link)
                warm_s = time.perf_counter() - start
            rows.append(
                Row(
                    wheel=link.filename,
                    size=link.size or 0,
                    read=cold.bytes_read,
                    warm_read=warm.bytes_read,
                    cold_s=cold_s,
                    warm_s=warm_s,
                )
            )
    return rows


def render(rows: list[Row]) -> str:
    width = max(len(row.wheel) for row in rows)
    head = (
        f"{'wheel':<{width}} {'wheel size':>13} {'bytes read':>10} {'ratio':>8} "
        f"{'cold':>7} {'warm':>7} {'warm bytes':>10}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        ratio = f"{row.read / row.size:.3%}" if row.size else "-"
        lines.append(
            f"{row.wheel:<{width}} {row.size:>13,} {row.read:>10,} {ratio:>8} "
            f"{row.cold_s:>6.2f}s {row.warm_s:>6.3f}s {row.warm_read:>10,}"
        )
    return "\n".join(lines)


class Counter(httpx.BaseTransport):
    """Passes requests through and counts them."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return self.inner.handle_request(request)


@dataclass(frozen=True, kw_only=True)
class PatchedRow:
    wheel: str
    size: int
    files: int  # the patched files, RECORD not counted
    read: int
    requests: int
    seconds: float


def bench_patched(lock_path: Path) -> list[PatchedRow]:
    """Read, cold, what resolve reads of each patched package's wheel."""
    rows = []
    for package in load_lock(lock_path).packages:
        if not package.tool.patches:
            continue
        (wheel,) = package.wheels
        paths = sorted({f.path for r in package.tool.patches for f in r.files})
        counter = Counter(httpx.HTTPTransport(retries=2))
        with (httpx.Client(transport=counter, timeout=60) as http,
              tempfile.TemporaryDirectory() as store):
            start = time.perf_counter()
            found = read_wheel_files(
                http, filename=wheel.name or "", url=wheel.url,
                sha256=wheel_sha256(wheel) or "", size=wheel.size, wanted=paths,
                store=ArtifactStore(Path(store)), offline=False)
            seconds = time.perf_counter() - start
        assert sorted(found.files) == paths, "every patched file read"
        rows.append(PatchedRow(wheel=wheel.name or "", size=wheel.size or 0,
                               files=len(paths), read=found.bytes_read,
                               requests=counter.requests, seconds=seconds))
    return rows


def render_patched(rows: list[PatchedRow], lock: Path) -> str:
    lines = [f"patched packages of {lock.name}: RECORD and the patched files, "
             "cold (the wheel's size: what uv or pip download for them)"]
    for row in rows:
        lines.append(f"{row.wheel}: {row.files} files + RECORD, {row.read:,} bytes "
                     f"of {row.size:,} ({row.read / row.size:.2%}) in "
                     f"{row.requests} requests, {row.seconds:.2f}s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--record", type=Path, help="write range fixtures into DIR")
    parser.add_argument("--patched-lock", type=Path, metavar="LOCK",
                        default=ROOT / "locks" / "pylock.pypi-cu130-sm120.toml",
                        help="a lock whose patched packages are read")
    args = parser.parse_args(argv)
    with httpx.Client(timeout=60) as http:
        links = {p: find_wheel(http, p, pattern) for p, pattern in WHEELS}
    if args.record:
        for project in RECORD:
            read = record(links[project], args.record)
            print(f"recorded {links[project].filename}: {read:,} bytes")
        return 0
    print(render(bench(list(links.values()))))
    print(render_patched(bench_patched(args.patched_lock), args.patched_lock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
