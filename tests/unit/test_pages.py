"""The page parsers on every real recorded page, counted independently of the
parser (regexes over the raw bytes, ``json.loads``), plus the edge cases the real
pages do not happen to contain."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urljoin

import pytest

from stacklock.index.pages import (
    Link,
    parse_file_listing,
    parse_flat_page,
    parse_html_page,
    parse_json_page,
)
from stacklock.urls import redact_url, strip_credentials
from tests.helpers.data import (
    FLASHINFER_PAGES,
    PYPI_PAGES,
    PYTORCH_PAGES,
    REAL,
    SGL_PAGES,
    read_fixture,
)

ANCHOR_RE = re.compile(rb"<a\s[^>]*>", re.IGNORECASE)
HREF_RE = re.compile(rb'href="([^"]*)"')
GH_PAGES = sorted(SGL_PAGES.rglob("index.html")) + sorted(
    FLASHINFER_PAGES.rglob("index.html"))
PYPI_PROJECTS = ("torch", "sgl-kernel", "flashinfer-python", "sglang", "packaging",
                 "urllib3")


def _expected_from_bytes(raw: bytes, base: str) -> Counter:
    """(filename, absolute url, sha256) per anchor, by regex, not by bs4."""
    out: Counter = Counter()
    for tag in ANCHOR_RE.findall(raw):
        href = html.unescape(HREF_RE.search(tag).group(1).decode())
        url, _, fragment = urljoin(base, href).partition("#")
        sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        out[(unquote(url.rsplit("/", 1)[-1]), url, sha)] += 1
    return out


def _served_at(path: Path) -> str:
    """The URL a gh-pages file is served at (its folder, with a slash)."""
    root, host = ((SGL_PAGES, "https://docs.sglang.io/whl/")
                  if SGL_PAGES in path.parents else
                  (FLASHINFER_PAGES, "https://flashinfer.ai/whl/"))
    rel = path.parent.relative_to(root).as_posix()
    return host if rel == "." else f"{host}{rel}/"


@pytest.mark.parametrize("path", GH_PAGES, ids=lambda p: str(p.relative_to(REAL)))
def test_every_anchor_of_the_real_gh_pages_is_accounted_for(path):
    raw = path.read_bytes()
    base = _served_at(path)
    page = parse_html_page(raw, base)
    expected = _expected_from_bytes(raw, base)
    assert page.anchors == sum(expected.values()) == len(page.links) + len(page.skipped)
    got = Counter((li.filename, li.url, li.sha256) for li in page.links)
    got += Counter((s.link.filename, s.link.url, s.link.sha256) for s in page.skipped)
    assert got == expected
    for link in page.links:  # release assets; a hash, when given, is well formed
        assert link.filename.endswith(".whl")
        assert link.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", link.sha256)
        assert link.url.startswith("https://github.com/")
    for skipped in page.skipped:  # folder links of the per-CUDA index pages
        assert not skipped.link.filename.endswith(".whl")
        assert skipped.reason


def test_sgl_cu128_has_one_wheel_without_a_hash():
    raw = (SGL_PAGES / "cu128/sgl-kernel/index.html").read_bytes()
    page = parse_html_page(raw, "https://docs.sglang.io/whl/cu128/sgl-kernel/")
    assert len(page.links) == raw.count(b"<a ") == 69
    missing = [li.filename for li in page.links if li.sha256 is None]
    assert missing == [
        "sgl_kernel-0.0.8.post1+cu128-cp39-abi3-manylinux2014_x86_64.whl"]


def test_an_empty_project_page_has_no_links():
    raw = (SGL_PAGES / "musa43/sgl-kernel/index.html").read_bytes()
    page = parse_html_page(raw, "https://docs.sglang.io/whl/musa43/sgl-kernel/")
    assert page.anchors == 0 and page.problem is None


def test_sgl_cu130_duplicates_are_all_kept():
    raw = (SGL_PAGES / "cu130/sgl-kernel/index.html").read_bytes()
    page = parse_html_page(raw, "https://docs.sglang.io/whl/cu130/sgl-kernel/")
    assert len(page.links) == 50 and not page.skipped
    hashes: dict[str, list[str]] = {}
    for link in page.links:
        hashes.setdefault(link.filename, []).append(link.sha256)
    x86 = "sgl_kernel-{}+cu130-cp310-abi3-manylinux2014_x86_64.whl"
    for version, times in (("0.3.21", 5), ("0.3.20", 4), ("0.3.16.post6", 3)):
        found = hashes[x86.format(version)]
        assert len(found) == times
        assert len(set(found)) == times  # different hashes, none dropped
    literal_plus = [li for li in page.links if "+cu130" in li.url]
    assert len(literal_plus) == 50


def test_flashinfer_local_versions_and_hashes():
    raw = (FLASHINFER_PAGES / "cu121/torch2.2/flashinfer/index.html").read_bytes()
    page = parse_html_page(raw, "https://flashinfer.ai/whl/cu121/torch2.2/flashinfer/")
    first = page.links[0]
    assert first.filename == (
        "flashinfer-0.0.2+cu121torch2.2-cp310-cp310-linux_x86_64.whl")
    assert first.sha256 == (
        "b1ade690fb4fbbeb9ed961277ec46ec40b02f795ad936e33f61aa8be95b1bfbc")
    assert first.url == ("https://github.com/flashinfer-ai/flashinfer/releases/download/"
                         "v0.0.2/" + first.filename)


def _pytorch(path: str) -> tuple[bytes, str]:
    return (read_fixture(PYTORCH_PAGES / path / "index.html"),
            f"https://download.pytorch.org/{path}/")


def test_pytorch_absolute_r2_href_with_metadata_but_no_sha256():
    raw, base = _pytorch("whl/cu128/torch")
    page = parse_html_page(raw, base)
    assert page.anchors == len(ANCHOR_RE.findall(raw)) == 2
    r2 = page.links[0]
    assert r2.url == ("https://download-r2.pytorch.org/whl/cu128/"
                      "torch-2.11.0%2Bcu128-cp310-cp310-manylinux_2_28_x86_64.whl")
    assert r2.filename == "torch-2.11.0+cu128-cp310-cp310-manylinux_2_28_x86_64.whl"
    assert r2.sha256 is None
    assert r2.metadata is True
    assert r2.metadata_sha256 == (
        "de881a744ff66b27fffc338c1624660cf7c87d3019574ad71e3dda886b2a172b")
    aarch64 = page.links[1]  # 1-space indent, relative href, no sha256
    assert aarch64.url == ("https://download.pytorch.org/whl/cu128/"
                           "torch-2.7.0%2Bcu128-cp310-cp310-manylinux_2_28_aarch64.whl")
    assert aarch64.sha256 is None and aarch64.metadata


def test_pytorch_relative_href_with_sha256_is_not_the_metadata_hash():
    raw, base = _pytorch("whl/cu126/torch")
    (link,) = parse_html_page(raw, base).links
    assert link.url.startswith("https://download.pytorch.org/whl/cu126/torch-2.6.0%2B")
    assert link.sha256 == (
        "c55280b4da58e565d8a25e0e844dc27d0c96aaada7b90b4de70a45397faf604e")
    assert link.metadata_sha256 == (
        "46e820dd4ceeddb24f74880c68c670cb37a310c0b5f5be7a6052fb6649401fd4")


def test_pytorch_nightly_without_hash_or_metadata():
    raw, base = _pytorch("whl/nightly/cu126/torch")
    page = parse_html_page(raw, base)
    assert len(page.links) == len(ANCHOR_RE.findall(raw)) == 5
    assert all(li.sha256 is None and not li.metadata for li in page.links)
    assert {li.filename.split("-")[1] for li in page.links} == {
        "2.6.0.dev20250102+cu126"}
    assert "torchvision-0.24.0+cu128-cp313-cp313-win_amd64.whl" in [
        li.filename for li in parse_html_page(*_pytorch("whl/torchvision")).links]


@pytest.mark.parametrize("project", PYPI_PROJECTS)
def test_pypi_json_and_html_give_the_same_links(project):
    base = f"https://pypi.org/simple/{project}/"
    raw_json = read_fixture(PYPI_PAGES / f"{project}.json")
    raw_html = read_fixture(PYPI_PAGES / f"{project}.html")
    from_json = parse_json_page(raw_json, base)
    from_html = parse_html_page(raw_html, base)
    files = json.loads(raw_json)["files"]
    assert len(from_json.links) + len(from_json.skipped) == len(files)
    assert from_html.anchors == len(ANCHOR_RE.findall(raw_html))
    assert len(from_json.links) == len(from_html.links) > 0

    def key(li: Link):
        return (li.filename, li.url, li.sha256, li.requires_python, li.yanked,
                li.metadata, li.metadata_sha256, li.upload_time)

    assert sorted(map(key, from_json.links)) == sorted(map(key, from_html.links))
    by_name = {f["filename"]: f for f in files}
    for link in from_json.links:
        entry = by_name[link.filename]
        assert link.sha256 == entry["hashes"]["sha256"]
        assert link.size == entry["size"]


def test_pypi_yanked_reason_and_requires_python_are_read():
    page = parse_json_page(read_fixture(PYPI_PAGES / "urllib3.json"),
                           "https://pypi.org/simple/urllib3/")
    yanked = {li.filename: li.yanked for li in page.links if li.yanked is not None}
    raw = json.loads(read_fixture(PYPI_PAGES / "urllib3.json"))
    expected = {f["filename"]: (f["yanked"] if isinstance(f["yanked"], str) else "")
                for f in raw["files"] if f.get("yanked")}
    assert yanked == expected and yanked
    html_page = parse_html_page(read_fixture(PYPI_PAGES / "urllib3.html"),
                                "https://pypi.org/simple/urllib3/")
    assert {li.filename: li.yanked for li in html_page.links
            if li.yanked is not None} == expected


def test_html_edge_cases():
    raw = b"""<html><head><base href="https://mirror.example/files/"></head><body>
    <a href="pkg-1.0-py3-none-any.whl#md5=0123">pkg</a>
    <a href="pkg-1.1-py3-none-any.whl#sha256=ABCDEF0123456789abcdef0123456789\
abcdef0123456789abcdef0123456789"
       data-requires-python="&gt;=3.10" data-yanked data-core-metadata="true"
       data-upload-time="2025-01-02T03:04:05Z">pkg</a>
    <a href="pkg-1.2-py3-none-any.whl" data-yanked="bad build"
       data-dist-info-metadata="sha1=abc">pkg</a>
    <a href="pkg-1.0.tar.gz#sha256=zz">sdist</a>
    <a href="pkg-0.9.egg">egg</a><a href="../other/">folder</a>
    <a href="not_a-wheel.whl">bad</a><a>no href</a><a href="">empty</a>
    </body></html>"""
    page = parse_html_page(raw, "https://ignored.example/simple/pkg/")
    assert page.anchors == 9
    first, second, third, sdist = page.links
    assert first.url == "https://mirror.example/files/pkg-1.0-py3-none-any.whl"
    assert first.sha256 is None and first.yanked is None and not first.metadata
    assert second.sha256 == (
        "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789")
    assert second.requires_python == ">=3.10"
    assert second.yanked == ""
    assert second.metadata and second.metadata_sha256 is None
    assert second.upload_time == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert third.yanked == "bad build" and third.metadata
    assert third.metadata_sha256 is None
    assert sdist.filename == "pkg-1.0.tar.gz" and sdist.sha256 is None
    reasons = {s.link.filename: s.reason for s in page.skipped}
    assert "legacy archive" in reasons["pkg-0.9.egg"]
    assert "no file name" in reasons[""]  # ../other/
    assert "cannot parse" in reasons["not_a-wheel.whl"]
    assert sum("without href" in r for r in
               (s.reason for s in page.skipped)) == 2  # <a> and <a href="">


def test_flat_page_keeps_every_project():
    raw = (FLASHINFER_PAGES / "cu121/flashinfer/index.html").read_bytes()
    page = parse_flat_page(raw, "https://flashinfer.ai/whl/cu121/flashinfer/")
    assert len(page.links) == len(ANCHOR_RE.findall(raw))


def test_json_edge_cases():
    doc = {"meta": {"api-version": "1.1"}, "name": "pkg", "files": [
        {"filename": "pkg-1.0-py3-none-any.whl",
         "url": "../../files/pkg-1.0-py3-none-any.whl",
         "hashes": {"sha256": "a" * 64, "md5": "b" * 32}, "yanked": True,
         "core-metadata": {"sha256": "c" * 64}, "size": 10,
         "upload-time": "2024-05-06T07:08:09.123456Z"},
        {"filename": "pkg-1.1-py3-none-any.whl", "url": "https://x.example/p.whl",
         "hashes": {}, "yanked": "oops", "dist-info-metadata": True,
         "requires-python": ""},
        {"filename": "pkg-1.1.exe", "url": "https://x.example/pkg-1.1.exe",
         "hashes": {}},
        {"filename": "no url"},
    ]}
    page = parse_json_page(json.dumps(doc).encode(), "https://x.example/simple/pkg/")
    a, b = page.links
    assert a.url == "https://x.example/files/pkg-1.0-py3-none-any.whl"
    assert (a.sha256, a.yanked, a.metadata, a.metadata_sha256, a.size) == (
        "a" * 64, "", True, "c" * 64, 10)
    assert a.upload_time == datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    assert (b.sha256, b.yanked, b.metadata, b.requires_python) == (None, "oops", True,
                                                                   None)
    assert [s.reason for s in page.skipped] == ["not a wheel or sdist",
                                                "file entry without a url"]


@pytest.mark.parametrize(
    "content", [b"<html>nope</html>", b"[1, 2]", b'{"projects": []}'])
def test_json_of_the_wrong_shape_is_a_problem_not_a_crash(content):
    page = parse_json_page(content, "https://x.example/simple/pkg/")
    assert page.problem and not page.links


def test_file_listing_quotes_plus_and_keeps_hash():
    page = parse_file_listing(
        [("sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl", 3, "d" * 64),
         ("README.md", 5, None)], "file:///srv/wheels")
    (link,) = page.links
    assert link.url == ("file:///srv/wheels/"
                        "sgl_kernel-0.3.21%2Bcu130-cp310-abi3-manylinux2014_x86_64.whl")
    assert link.sha256 == "d" * 64 and link.size == 3
    assert page.skipped[0].reason == "not a wheel or sdist"


def test_redaction():
    url = "https://alice:s3cret@pypi.example/simple/torch/"
    assert redact_url(url) == "https://alice:***@pypi.example/simple/torch/"
    assert redact_url("https://tok3n@h.example/x") == "https://***@h.example/x"
    assert strip_credentials(url) == "https://pypi.example/simple/torch/"
    assert redact_url("https://pypi.org/simple/") == "https://pypi.org/simple/"
    link = Link(filename="a-1-py3-none-any.whl", url=url + "a-1-py3-none-any.whl")
    assert "s3cret" not in json.dumps(link.to_dict())
