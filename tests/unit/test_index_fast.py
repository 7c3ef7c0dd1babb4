"""The fast paths of the index layer give the same answers as the full ones.

The finder judges only the wheels that a string pre-filter on the tag part of the
file name lets through, and the client caches a page's rows (or PEP 691 file
entries) beside the page. Both are checked against packaging and the full
evaluation on every real recorded page, for several targets.
"""

from __future__ import annotations

import itertools
import json
import marshal

import httpx
import pytest
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from stacklock.index import cache as cache_module
from stacklock.index import client as client_module
from stacklock.index.evaluate import LinkEvaluator
from stacklock.index.finder import Finder
from stacklock.index.json_scan import MIN_SCAN, ScannedFiles, scan_files
from stacklock.index.links import parse_filename
from stacklock.index.pages import (
    _json_row,
    parse_html_page,
    parse_json_page,
    rows_from_html,
    rows_from_json,
)
from stacklock.profile import IndexSpec
from stacklock.target import Target
from tests.helpers.data import (
    FLASHINFER_PAGES,
    PYPI_PAGES,
    PYTORCH_PAGES,
    SGL_PAGES,
    read_fixture,
    recorded_pypi,
)

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PYPI = IndexSpec(name="pypi", url="https://pypi.org/simple")
PYPI_PROJECTS = ("torch", "sgl-kernel", "flashinfer-python", "sglang", "packaging",
                 "urllib3")
TARGETS = [
    Target(python="3.12"),
    Target(python="3.10", platform="linux_aarch64", manylinux="2_17"),
    Target(python="3.13", manylinux="2_34"),
    Target(python="3.9", manylinux="2_17"),
]
HTML_PAGES = sorted([*SGL_PAGES.rglob("index.html"), *FLASHINFER_PAGES.rglob(
    "index.html"), *PYTORCH_PAGES.rglob("index.html")])


def _all_filenames() -> list[str]:
    names = []
    for project in PYPI_PROJECTS:
        files = json.loads(read_fixture(PYPI_PAGES / f"{project}.json"))["files"]
        names += [f["filename"] for f in files]
    for path in HTML_PAGES:
        names += [li.filename for li in
                  parse_html_page(path.read_bytes(), "https://x.example/").links]
    return names


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t.python}-{t.platform}")
def test_prefilter_never_drops_a_wheel_packaging_accepts(target):
    evaluator = LinkEvaluator(target, exclude_newer=None)
    accepted = set(target.tags())
    names = _all_filenames()
    kept = 0
    for name in names:
        try:
            tags = parse_wheel_filename(name)[3]
        except InvalidWheelFilename:
            continue
        if tags & accepted:
            assert evaluator.could_fit(name), name
            kept += 1
    dropped = sum(not evaluator.could_fit(n) for n in names)
    assert kept > 0 and dropped > len(names) // 2  # it does filter, and safely


def test_wheel_names_parse_as_packaging_parses_them():
    """parse_filename reads a wheel's tag part once per spelling; what it gives
    (and the message of what it refuses) is packaging's, on every recorded name
    and on names each part of which packaging refuses."""
    odd = ["pkg-1.0-py3-none-.whl", "pkg-1.0-3py-none-any.whl",
           "pkg-1.0-x-py3-none-any.whl", "Pkg__x-1.0-py3-none-any.whl",
           "pkg-1.0-py3.py2-none-any.whl", "pkg-1.0-py3-none.whl",
           "pkg-1.0.0-1a-cp312-cp312-manylinux_2_28_x86_64.whl",
           "pkg-one-py3-none-any.whl", "pkg-1.0-py3--any.whl",
           "PKG-1.0-PY3-NONE-ANY.whl"]
    names = [n for n in _all_filenames() if n.endswith(".whl")] + odd
    for name in names:
        try:
            expected: object = parse_wheel_filename(name)
        except InvalidWheelFilename as exc:
            expected = f"wheel name packaging cannot parse: {exc}"
        assert parse_filename(name) == expected, name
    assert sum(isinstance(parse_filename(n), str) for n in odd) >= 6


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t.python}-{t.platform}")
def test_one_pass_split_keeps_what_could_fit_keeps(target):
    evaluator = LinkEvaluator(target, exclude_newer=None)
    names: list[str | None] = [*_all_filenames(), None, "", "x.egg", "a-1.zip"]
    wheels, sdists = evaluator.split_could_fit(names)
    kept = [i for i, n in enumerate(names) if n is not None and evaluator.could_fit(n)]
    assert sorted(wheels + sdists) == kept
    assert all(names[i].endswith(".whl") for i in wheels)  # type: ignore[union-attr]
    assert not any(names[i].endswith(".whl") for i in sdists)  # type: ignore[union-attr]
    assert wheels and sdists


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t.python}-{t.platform}")
def test_candidates_equal_the_compatible_links_of_the_full_evaluation(
        make_client, target):
    sgl = IndexSpec(name="sgl", url=str(SGL_PAGES / "cu130"))
    for index, projects in ((PYPI, PYPI_PROJECTS), (sgl, ("sgl-kernel",))):
        for project in projects:
            fast = Finder(make_client(recorded_pypi), [index], target)
            full = Finder(make_client(recorded_pypi, cache_dir=None), [index], target)
            found = fast.find_candidates(project)
            compatible = [ev for ev in full.evaluate(project) if ev.compatible]
            # a version's sdist is a candidate only where none of its wheels fits
            with_wheel = {ev.version for ev in compatible if ev.link.is_wheel}
            expected = [ev for ev in compatible
                        if ev.link.is_wheel or ev.version not in with_wheel]
            assert found == expected, project
            # best first: version, then build tag, descending; then tag rank
            # and file name, ascending
            for a, b in itertools.pairwise(found):
                assert (a.version, a.build) >= (b.version, b.build), project
                if (a.version, a.build) == (b.version, b.build):
                    assert (a.tag_rank, a.link.filename) <= (
                        b.tag_rank, b.link.filename), project
            # an exact pin also lets yanked wheels through, as before
            for ev in full.evaluate(project)[:40]:
                if ev.version is not None and ev.reason and \
                        ev.reason.startswith("yanked"):
                    pinned = fast.find_candidates(project,
                                                  specifier=f"=={ev.version}")
                    assert ev.link in [p.link for p in pinned]


def _eager_rows(raw: bytes, base: str) -> list:
    """Every entry decoded by json, the way a page below MIN_SCAN is read."""
    return [_json_row(e, base) for e in json.loads(raw)["files"]]


@pytest.mark.parametrize("project", ["torch", "sglang", "urllib3"])
@pytest.mark.parametrize("compact", [False, True])
def test_a_scanned_page_gives_the_rows_of_a_decoded_one(project, compact):
    """Large real pages, as recorded and re-serialized the compact way PyPI
    writes JSON: entries are found by scanning, decoded one by one."""
    raw = read_fixture(PYPI_PAGES / f"{project}.json")
    if compact:
        raw = json.dumps(json.loads(raw), separators=(",", ":")).encode()
    assert len(raw) >= MIN_SCAN
    base = f"https://pypi.org/simple/{project}/"
    rows = rows_from_json(raw, base)
    assert isinstance(rows.files, ScannedFiles)
    eager = _eager_rows(raw, base)
    assert [rows.row(i) for i in range(len(rows))] == eager
    assert rows.files.decoded_whole is False  # each entry on its own
    assert rows.filenames() == [r[0] for r in eager]
    assert list(rows.all_rows()) == eager


def test_braces_and_quotes_inside_strings_do_not_fool_the_scan():
    """A yanked reason may hold '[{', ', {' or the text "filename" (JSON escapes
    only the quotes): the scan reads such a page right; a file name with an
    escape sends the page to the whole decode, with the same rows."""
    base = "https://pypi.org/simple/demo/"
    files = [{"filename": f"demo-1.{i}-py3-none-any.whl", "url": f"{base}d{i}.whl",
              "hashes": {"sha256": "ab" * 32}, "yanked": False,
              "requires-python": ">=3.8", "upload-time": None}
             for i in range(900)]
    files[7]["yanked"] = 'broken: [{"filename": "x.whl"}, {"a": 1}] and } { too'
    files[8]["hashes"] = {"sha256": "cd" * 32, "blake2b": "ef" * 32}
    for layout in ({}, {"separators": (",", ":")}, {"indent": 1}):
        raw = json.dumps({"files": files, "name": "demo"}, **layout).encode()
        rows = rows_from_json(raw, base)
        assert isinstance(rows.files, ScannedFiles), layout
        assert [rows.row(i) for i in range(len(rows))] == _eager_rows(raw, base)
        assert rows.files.decoded_whole is False
        assert rows.filenames() == [f["filename"] for f in files]
    files[5]["filename"] = 'demo-1.5-py3-none-any\u00e9".whl'
    raw = json.dumps({"files": files, "name": "demo"}).encode()
    assert scan_files(raw) is None
    rows = rows_from_json(raw, base)
    assert [rows.row(i) for i in range(len(files))] == _eager_rows(raw, base)


def test_a_page_that_spells_the_key_two_ways_is_scanned_whole():
    """The plain search finds PyPI's spelling (``"filename": "``); a page where
    some keys are spelt otherwise is read by the pattern, every name found."""
    base = "https://pypi.org/simple/demo/"
    files = [{"filename": f"demo-1.{i}-py3-none-any.whl", "url": f"{base}d{i}.whl",
              "hashes": {"sha256": "ab" * 32}} for i in range(900)]
    raw = json.dumps({"files": files, "name": "demo"}).encode()
    mixed = raw.replace(b'"filename": "demo-1.3-', b'"filename" :"demo-1.3-', 1)
    assert mixed != raw
    for page in (raw, mixed):
        scanned = scan_files(page)
        assert scanned is not None
        assert scanned.names == [f["filename"] for f in files]
        assert [scanned[i] for i in (0, 3, 899)] == [files[0], files[3], files[899]]


def test_a_scanned_page_keeps_no_rows_blob_and_is_scanned_again(make_client,
                                                                tmp_path):
    def handler(request):
        return recorded_pypi(request)

    first = make_client(handler).get_links(PYPI, "torch")
    assert _rows_blobs(tmp_path / "cache") == []
    again = make_client(handler, offline=True).get_links(PYPI, "torch")
    assert again == first


def test_lazy_json_rows_are_the_eager_page():
    raw = read_fixture(PYPI_PAGES / "torch.json")
    base = "https://pypi.org/simple/torch/"
    rows = rows_from_json(raw, base)
    assert rows.files is not None and len(rows) == len(json.loads(raw)["files"])
    assert rows.to_page() == parse_json_page(raw, base)
    assert [rows.row(i) for i in range(len(rows))] == list(rows.all_rows())
    assert rows.filenames() == [r[0] for r in rows.all_rows()]
    html = rows_from_html(read_fixture(PYPI_PAGES / "torch.html"), base)
    assert sorted(html.filenames()) == sorted(rows.filenames())


def _rows_blobs(root):
    return sorted(root.rglob("*.rows"))


def test_rows_blob_is_used_warm_and_a_stale_one_is_ignored(make_client, tmp_path,
                                                          monkeypatch):
    calls = []

    def handler(request):
        calls.append(request.url)
        return recorded_pypi(request)

    first = make_client(handler).get_links(PYPI, "packaging")  # decoded whole
    (blob,) = _rows_blobs(tmp_path / "cache")
    version, anchors, _rows, files, base = marshal.loads(blob.read_bytes())
    assert version == cache_module.ROWS_FORMAT and anchors == len(files)
    assert base == "https://pypi.org/simple/packaging/"

    # warm and offline: the blob answers; the page body is not even parsed
    def no_parse(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(client_module, "rows_from_json", no_parse)
    assert make_client(handler, offline=True).get_links(PYPI, "packaging") == first
    assert len(calls) == 1
    monkeypatch.undo()

    # a blob of another format is ignored: the page is parsed from the cached body
    blob.write_bytes(marshal.dumps((-1, 0, (), None, "")))
    assert make_client(handler, offline=True).get_links(PYPI, "packaging") == first
    assert marshal.loads(blob.read_bytes())[0] == cache_module.ROWS_FORMAT
    # a torn blob too
    blob.write_bytes(b"\x00garbage")
    assert make_client(handler, offline=True).get_links(PYPI, "packaging") == first
    assert len(calls) == 1


def test_no_rows_blob_for_an_index_url_with_credentials(make_client, tmp_path):
    """PyTorch's pages have relative hrefs: their links carry the index's
    credentials in memory, so their rows are never written to disk."""
    page = read_fixture(PYTORCH_PAGES / "whl/nightly/cu126/torch/index.html")

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/html"},
                              content=page)

    secret = IndexSpec(name="private",
                       url="https://alice:s3cret@pkgs.example/whl/nightly/cu126")
    links = make_client(handler).get_links(secret, "torch")
    assert links and all(li.url.startswith("https://alice:s3cret@pkgs.example/")
                         for li in links)
    assert _rows_blobs(tmp_path / "cache") == []
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert b"s3cret" not in path.read_bytes()
    again = make_client(handler, offline=True).get_links(secret, "torch")
    assert again == links
    plain = IndexSpec(name="plain", url="https://pkgs.example/whl/nightly/cu126")
    make_client(handler).get_links(plain, "torch")
    assert len(_rows_blobs(tmp_path / "cache")) == 1


def test_wheel_counts_for_the_sdist_note_equal_the_full_evaluation(make_client):
    target = Target(python="3.12")
    for project in ("urllib3", "torch", "packaging"):
        finder = Finder(make_client(recorded_pypi), [PYPI], target)
        evaluations = finder.evaluate(project)
        versions = {ev.version for ev in evaluations if ev.version is not None}
        assert len(versions) > 5
        for version in sorted(versions)[:: max(1, len(versions) // 12)]:
            expected = sum(1 for ev in evaluations
                           if ev.version == version and ev.link.is_wheel)
            assert finder.count_wheels(project, version) == expected, (project,
                                                                       version)
