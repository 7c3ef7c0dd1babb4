"""NVIDIA page parsers and the catalog refresh, on the real redistrib_13.0.1.json.

md5sum.txt, the local_installers listing and the archive page have no recording
anywhere (see stacklock/data/PROVENANCE.md). The ones below are CONSTRUCTED: their
values are real (the rwgk md5 catalog, spack's runfile names, NVIDIA's
archive-page URL form), their shape is the documented format (coreutils md5sum lines,
an HTML listing of anchors, links to cuda-X-Y-Z-download-archive pages).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from stacklock.cli import main
from stacklock.cuda.catalog import Catalog, load_catalog, parse_catalog
from stacklock.cuda.refresh import refresh_catalog, render_refresh
from stacklock.cuda.scrape import (
    ARCHIVE_URL,
    listing_url,
    md5sum_url,
    parse_archive_page,
    parse_local_installers,
    parse_md5sum_txt,
    parse_redistrib_manifest,
    parse_runfile_name,
    redistrib_url,
)
from stacklock.errors import CudaError
from tests.helpers.jsonout import parse_output

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
MANIFEST = (REAL / "redistrib_13.0.1.json").read_bytes()


def _rwgk(version: str) -> list[dict[str, str]]:
    with (REAL / "nvidia-runfile-md5-size-rwgk-catalog.tsv").open() as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [r for r in rows if r["VERSION"] == version]


def constructed_md5sum(version: str) -> bytes:
    """CONSTRUCTED md5sum.txt: the real rwgk md5 values, coreutils format."""
    return "".join(f"{r['MD5']}  {r['FILENAME']}\n" for r in _rwgk(version)).encode()


def constructed_listing(version: str) -> bytes:
    """CONSTRUCTED local_installers/ listing: anchors to the real runfile names."""
    anchors = "".join(f'<a href="{r["FILENAME"]}">{r["FILENAME"]}</a>\n'
                      for r in _rwgk(version))
    return (f"<html><body><h1>Index of /compute/cuda/{version}/local_installers/"
            f'</h1>\n<a href="../">../</a>\n{anchors}</body></html>\n').encode()


def constructed_archive(versions: list[str]) -> bytes:
    """CONSTRUCTED archive page: links to cuda-X-Y-Z-download-archive pages."""
    anchors = "".join(
        f'<li><a href="https://developer.nvidia.com/cuda-{v.replace(".", "-")}-'
        f'download-archive">CUDA Toolkit {v}</a></li>\n' for v in versions)
    return f"<html><body><ul>\n{anchors}</ul></body></html>\n".encode()


def serve(pages: dict[str, bytes]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        body = pages.get(str(request.url))
        return httpx.Response(200, content=body) if body is not None else (
            httpx.Response(404))
    return httpx.Client(transport=httpx.MockTransport(handler))


def pages_13_0_1(**overrides: bytes) -> dict[str, bytes]:
    pages = {
        ARCHIVE_URL: constructed_archive(["13.4.1", "13.0.1", "12.8.0"]),
        md5sum_url("13.0.1"): constructed_md5sum("13.0.1"),
        listing_url("13.0.1"): constructed_listing("13.0.1"),
        redistrib_url("13.0.1"): MANIFEST,
    }
    pages.update({{"md5": md5sum_url("13.0.1"), "redistrib": redistrib_url("13.0.1"),
                   "archive": ARCHIVE_URL}[k]: v for k, v in overrides.items()})
    return pages


def with_values(catalog: Catalog, version: str, **changes: Any) -> Catalog:
    """The catalog with some 13.0.1 linux-x86_64 values replaced (for the tests
    that need the catalog, not NVIDIA, to be the side that differs)."""
    data = catalog.to_dict()
    release = next(r for r in data["releases"] if r["version"] == version)
    for key, value in changes.items():
        release["platforms"]["linux-x86_64"][key]["value"] = value
    return parse_catalog(data)


def test_real_redistrib_manifest():
    manifest = parse_redistrib_manifest(MANIFEST)
    assert manifest.release_label == "13.0.1"
    assert manifest.release_date == "2025-09-04"
    assert manifest.nvcc_version == "13.0.88"
    assert manifest.driver_version == "580.82.07"
    assert "linux-sbsa" in manifest.platforms["cuda_cudart"]
    pinned = {r["version"]: r["sha256"] for r in csv.DictReader(
        (REAL / "redistrib-json-sha256-rules_ml_toolchain.tsv").open(), delimiter="\t")}
    assert manifest.sha256 == pinned["13.0.1"]


def test_md5sum_parser():
    text = constructed_md5sum("13.0.1") + b"\nnot a checksum line\n"
    sums = parse_md5sum_txt(text)
    assert sums.sums["cuda_13.0.1_580.82.07_linux.run"] == (
        "8c56e3cb1ab74370aafed5a4600bc5bc")
    assert sums.skipped == ("not a checksum line",)
    binary_mode = b"8C56E3CB1AB74370AAFED5A4600BC5BC *local_installers/x.run\n"
    assert parse_md5sum_txt(binary_mode).sums == {
        "x.run": "8c56e3cb1ab74370aafed5a4600bc5bc"}
    with pytest.raises(CudaError, match=r"not an md5sum\.txt"):
        parse_md5sum_txt(b"<html>moved</html>")


def test_listing_and_archive_parsers():
    assert parse_local_installers(constructed_listing("13.0.1")) == [
        "cuda_13.0.1_580.82.07_linux.run", "cuda_13.0.1_580.82.07_linux_sbsa.run"]
    assert parse_archive_page(constructed_archive(["12.8.0", "13.4.1", "13.0.1"])) == [
        "13.4.1", "13.0.1", "12.8.0"]
    assert parse_runfile_name("cuda_13.4.1_linux.run") == (
        "13.4.1", "linux-x86_64", None)
    assert parse_runfile_name("cuda_12.4.1_550.54.15_linux_ppc64le.run") is None


def test_refresh_agrees_and_discovers_a_new_release():
    report = refresh_catalog(serve(pages_13_0_1()), load_catalog(),
                             versions=["13.0.1"])
    assert [(c.version, c.field) for c in report.changes] == [("13.4.1", "release")]
    assert report.catalog.get("13.4.1").compat_floor == "580.0"
    assert report.catalog.get("13.4.1").min_driver is None
    assert report.catalog.get("13.0.1") == load_catalog().get("13.0.1")
    assert report.urls_read == 4
    assert "13.4.1: new release" in render_refresh(report)


def test_refresh_fills_a_missing_md5_and_reports_it():
    catalog = with_values(load_catalog(), "13.0.1", md5=None)
    report = refresh_catalog(serve(pages_13_0_1()), catalog, versions=["13.0.1"],
                             discover=False)
    (change,) = report.changes
    assert (change.field, change.old, change.new) == (
        "md5", None, "8c56e3cb1ab74370aafed5a4600bc5bc")
    assert change.source == md5sum_url("13.0.1")
    rf = report.catalog.get("13.0.1").runfile()
    assert rf is not None and rf.sources["md5"] == "nvidia-md5sum"


def test_md5_disagreement_is_an_error_never_an_overwrite():
    other = _rwgk("13.0.2")[0]["MD5"]  # a real md5, of another release
    catalog = with_values(load_catalog(), "13.0.1", md5=other)
    with pytest.raises(CudaError) as info:
        refresh_catalog(serve(pages_13_0_1()), catalog, versions=["13.0.1"])
    assert other in info.value.message and "8c56e3cb" in info.value.message
    assert info.value.hint is not None and "nothing was changed" in info.value.hint


def test_manifest_with_other_bytes_is_an_error():
    # nixpkgs stores this manifest with one added newline: not NVIDIA's bytes
    pages = pages_13_0_1(redistrib=MANIFEST + b"\n")
    with pytest.raises(CudaError, match="redistrib_sha256"):
        refresh_catalog(serve(pages), load_catalog(), versions=["13.0.1"])


def test_new_runfile_from_md5sum_for_a_release_without_one():
    catalog = load_catalog()
    data = catalog.to_dict()
    release = next(r for r in data["releases"] if r["version"] == "13.0.1")
    del release["platforms"]["linux-sbsa"]
    report = refresh_catalog(serve(pages_13_0_1()), parse_catalog(data),
                             versions=["13.0.1"], discover=False)
    fields = [(c.platform, c.field) for c in report.changes]
    assert ("linux-sbsa", "runfile") in fields and ("linux-sbsa", "md5") in fields
    rf = report.catalog.get("13.0.1").runfile("linux-sbsa")
    assert rf is not None and rf.bundled_driver == "580.82.07"
    assert rf.sha256 is None  # NVIDIA publishes no sha256 for runfiles


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)


def test_unreachable_nvidia_is_one_clear_error():
    client = httpx.Client(transport=httpx.MockTransport(refuse))
    with pytest.raises(CudaError) as info:
        refresh_catalog(client, load_catalog())
    assert ARCHIVE_URL in info.value.message
    assert info.value.hint is not None and "embedded" in info.value.hint


def test_server_error_is_an_error():
    client = httpx.Client(transport=httpx.MockTransport(
        lambda request: httpx.Response(503)))
    with pytest.raises(CudaError, match="503"):
        refresh_catalog(client, load_catalog(), versions=["13.0.1"])


def _patch_client(monkeypatch: pytest.MonkeyPatch, transport: httpx.BaseTransport
                  ) -> None:
    import stacklock.http

    real = stacklock.http.make_http_client

    def factory(**kwargs: Any) -> httpx.Client:
        return real(transport=transport, **kwargs)

    # the CLI imports make_http_client from stacklock.http when it runs
    monkeypatch.setattr(stacklock.http, "make_http_client", factory)


def test_cli_refresh_unreachable_exits_3_with_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    _patch_client(monkeypatch, httpx.MockTransport(refuse))
    assert main(["cuda", "refresh"]) == 3  # the network's, not the input's
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert ARCHIVE_URL in err and "embedded CUDA catalog is used" in err


def test_cli_refresh_writes_the_refreshed_catalog(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    pages = pages_13_0_1()
    _patch_client(monkeypatch, httpx.MockTransport(
        lambda request: httpx.Response(200, content=pages[str(request.url)])
        if str(request.url) in pages else httpx.Response(404)))
    out = tmp_path / "cuda_releases.json"
    assert main(["cuda", "refresh", "--version", "13.0.1", "--write", str(out),
                 "--json"]) == 0
    report = parse_output(capsys.readouterr().out)
    assert report["checked"] == ["13.0.1"]
    assert [c["version"] for c in report["changes"]] == ["13.4.1"]
    written = parse_catalog(json.loads(out.read_text()))
    assert "13.4.1" in written.versions()
    assert written.get("13.0.1") == load_catalog().get("13.0.1")
