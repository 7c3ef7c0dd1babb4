"""Record the real responses the index tests run on.

    .venv/bin/python scripts/record_fixtures.py pypi      # PyPI pages, JSON + HTML
    .venv/bin/python scripts/record_fixtures.py pytorch   # PyTorch pages from excerpts
    .venv/bin/python scripts/record_fixtures.py cassette  # client cassette
    .venv/bin/python scripts/record_fixtures.py all

``pypi`` GETs ``https://pypi.org/simple/<project>/`` twice per project, once asking
for PEP 691 JSON and once for HTML, and stores the bodies as they came (gzip-
compressed when large) in tests/data/pypi/, with PROVENANCE.md naming URL, date,
content type, size and sha256 of each body.

``pytorch`` places the real anchor lines of tests/data/real/pytorch-index-anchor-
excerpts/ (quoted byte for byte from the live pages in public GitHub threads) into
the page skeleton that tests/data/real/PROVENANCE.md section 1 describes, one page
per index URL the anchors came from. Nothing is typed by hand: the anchor lines are
copied unchanged, the skeleton is the one pytorch/test-infra's generator writes.

``cassette`` records, through tests/helpers/cassette.py, what the client tests
replay: the negotiated page of one small project, a 404 project, and a HEAD plus a
ranged GET of one small wheel (so the cassette format is exercised on real ranged
traffic).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklock.index.client import ACCEPT  # noqa: E402
from tests.helpers.cassette import RecordingTransport  # noqa: E402

DATA = ROOT / "tests" / "data"
PYPI = "https://pypi.org/simple"
PROJECTS = ("torch", "sgl-kernel", "flashinfer-python", "sglang", "packaging",
            "urllib3")
FORMATS = {
    "json": "application/vnd.pypi.simple.v1+json",
    "html": "application/vnd.pypi.simple.v1+html;q=0.9, text/html;q=0.5",
}
GZIP_OVER = 64 * 1024

# excerpt file -> (page path on download.pytorch.org, project, the page's date)
PYTORCH_PAGES = {
    "cu126-torch-2.6.0_pytorch-issue-164347.html": ("whl/cu126/torch", "torch",
                                                    "2025-10-01"),
    "cu128-torch-2.11.0_pytorch-issue-181056.html": ("whl/cu128/torch", "torch",
                                                     "2026-04-22"),
    "cu128-torch-2.7.0-aarch64_pytorch-issue-153469.html": ("whl/cu128/torch",
                                                            "torch", "2025-05-13"),
    "nightly-cu126-torch-2.6.0.dev20250102_test-infra-pr-6116.html": (
        "whl/nightly/cu126/torch", "torch", "2024-12-27"),
    "torchvision-cu128-0.24.0-win_vision-issue-9243.html": (
        "whl/torchvision", "torchvision", "2025-10-15"),
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_pypi(http: httpx.Client, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for project in PROJECTS:
        for fmt, accept in FORMATS.items():
            url = f"{PYPI}/{project}/"
            response = http.get(url, headers={"Accept": accept})
            response.raise_for_status()
            body = response.content
            declared = response.headers.get("content-length")
            if declared and response.headers.get("content-encoding") is None and \
                    int(declared) != len(body):
                raise SystemExit(f"{url}: truncated ({len(body)} of {declared})")
            name = f"{project}.{fmt}"
            if len(body) > GZIP_OVER:
                (out / f"{name}.gz").write_bytes(gzip.compress(body, mtime=0))
                (out / name).unlink(missing_ok=True)
                name += ".gz"
            else:
                (out / name).write_bytes(body)
            rows.append((name, url, accept, response.headers.get("content-type", ""),
                         len(body), hashlib.sha256(body).hexdigest()))
            print(f"{name}: {len(body)} bytes")
    lines = [
        "# Recorded PyPI simple-index pages",
        "",
        f"Recorded {_now()} by `scripts/record_fixtures.py pypi` from the live "
        "index. Bodies are stored exactly as received; `.gz` files are the same "
        "bytes gzip-compressed (the tests decompress them). sha256 and size are of "
        "the uncompressed body.",
        "",
        "| file | URL | Accept sent | content-type received | bytes | sha256 |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| `{n}` | {u} | `{a}` | `{c}` | {s} | `{h}` |"
              for n, u, a, c, s, h in rows]
    lines += ["", "What: the project pages of a GPU stack (torch, sgl-kernel, "
              "flashinfer-python, sglang) plus two small, long-lived projects "
              "(packaging, urllib3 - the latter has yanked releases).", ""]
    (out / "PROVENANCE.md").write_text("\n".join(lines), "utf-8")


def _skeleton(project: str, anchor_lines: list[bytes], stamp: int) -> bytes:
    head = (b"<!DOCTYPE html>\n<html>\n  <body>\n    <h1>Links for "
            + project.encode() + b"</h1>\n")
    tail = b"  </body>\n</html>\n<!--TIMESTAMP " + str(stamp).encode() + b"-->\n"
    return head + b"".join(line.rstrip(b"\r\n") + b"\n" for line in anchor_lines) + tail


def build_pytorch(out: Path) -> None:
    source = DATA / "real" / "pytorch-index-anchor-excerpts"
    pages: dict[str, tuple[str, list[bytes], list[str], str]] = {}
    for excerpt, (path, project, date) in PYTORCH_PAGES.items():
        lines = [ln for ln in (source / excerpt).read_bytes().splitlines(keepends=True)
                 if ln.strip()]
        _, got, files, last = pages.get(path, (project, [], [], date))
        pages[path] = (project, got + lines, [*files, excerpt], max(last, date))
    rows = []
    for path, (project, lines, files, date) in sorted(pages.items()):
        stamp = int(datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp())
        body = _skeleton(project, lines, stamp)
        target = out / path / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
        rows.append((f"{path}/index.html", len(lines), ", ".join(files), stamp))
        print(f"{path}/index.html: {len(lines)} anchors")
    lines_md = [
        "# PyTorch index pages built from real anchor lines",
        "",
        f"Built {_now()} by `scripts/record_fixtures.py pytorch`. download.pytorch.org "
        "cannot be reached from here and no stored full page exists (see "
        "`../real/PROVENANCE.md` section 1), so each page is the skeleton that "
        "section describes (`<!DOCTYPE html>`, `<html>`, `  <body>`, "
        "`    <h1>Links for NAME</h1>`, the anchors, `</body></html>`, a "
        "`<!--TIMESTAMP n-->` comment) around the real anchor lines, copied byte "
        "for byte (leading whitespace and `<br/>` kept, blank lines dropped). "
        "The TIMESTAMP value is the date of the quoting thread, as epoch seconds.",
        "",
        "Each page lives at the path it has on `https://download.pytorch.org/`, so "
        "tests parse it with that URL as base (relative hrefs start with `/whl/`).",
        "",
        "| page | anchors | from excerpt files | TIMESTAMP |",
        "|---|---|---|---|",
    ]
    lines_md += [f"| `{p}` | {n} | {f} | {s} |" for p, n, f, s in rows]
    (out / "PROVENANCE.md").write_text("\n".join(lines_md) + "\n", "utf-8")


def record_cassette(out: Path) -> None:
    """One small project page (negotiated as the client does), a 404, and a
    HEAD + ranged GET of the smallest wheel of that project."""
    transport = RecordingTransport(out, httpx.HTTPTransport(retries=2))
    with httpx.Client(transport=transport, follow_redirects=True,
                      timeout=30.0) as http:
        page = http.get(f"{PYPI}/packaging/", headers={"Accept": ACCEPT})
        page.raise_for_status()
        http.get(f"{PYPI}/stacklock-no-such-project-fixture/",
                 headers={"Accept": ACCEPT})
        wheel = next(f for f in reversed(page.json()["files"])
                     if f["filename"].endswith(".whl"))
        head = http.head(wheel["url"])
        size = int(head.headers["content-length"])
        http.get(wheel["url"], headers={"Range": f"bytes={size - 4096}-"})
    note = (
        "# Client cassette\n\nRecorded "
        f"{_now()} by `scripts/record_fixtures.py cassette` through "
        "`tests/helpers/cassette.py`'s RecordingTransport from the live index: "
        f"`{PYPI}/packaging/` with the client's Accept header, a 404 project page, "
        f"and a HEAD plus a ranged GET (last 4096 bytes) of `{wheel['filename']}` "
        f"(index sha256 `{wheel['hashes']['sha256']}`). Format: see the "
        "docstring of tests/helpers/cassette.py.\n")
    (out / "PROVENANCE.md").write_text(note, "utf-8")
    print(f"cassette: {len(transport.entries)} entries")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["pypi", "pytorch", "cassette", "all"])
    args = parser.parse_args()
    if args.what in ("pytorch", "all"):
        build_pytorch(DATA / "pytorch")
    if args.what in ("pypi", "all"):
        with httpx.Client(timeout=60.0, follow_redirects=True,
                          transport=httpx.HTTPTransport(retries=2)) as http:
            record_pypi(http, DATA / "pypi")
    if args.what in ("cassette", "all"):
        record_cassette(DATA / "pypi" / "cassette-client")
    return 0


if __name__ == "__main__":
    sys.exit(main())
