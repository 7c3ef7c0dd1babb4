"""The embedded CUDA catalog against the recorded real sources it is built from."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from stacklock.cli import main
from stacklock.cuda.catalog import load_catalog, parse_catalog, render_releases
from stacklock.errors import CudaError
from tests.helpers.jsonout import parse_output

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "data" / "real"


def _tsv(name: str) -> list[dict[str, str]]:
    lines = [ln for ln in (REAL / name).read_text().splitlines()
             if not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


def _build_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "build_cuda_catalog", ROOT / "scripts" / "build_cuda_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_show_13_0_1_json_has_the_shared_data(capsys: pytest.CaptureFixture[str]):
    assert main(["cuda", "show", "13.0.1", "--json"]) == 0
    [shown] = parse_output(capsys.readouterr().out, "cuda-show")["releases"]
    rwgk = next(r for r in _tsv("nvidia-runfile-md5-size-rwgk-catalog.tsv")
                if r["VERSION"] == "13.0.1" and r["PLATFORM"] == "linux-amd64")
    assert shown["runfile"] == "cuda_13.0.1_580.82.07_linux.run"
    assert shown["url"] == rwgk["URL"]
    assert shown["min_driver"] == "580.82.07"
    assert shown["sha256"] == (
        "4c7ac59d1f41d67be27d140a4622801738ad71088570a0facfd6ec878a4c4100")
    assert shown["md5"] == rwgk["MD5"]
    assert shown["size"] == int(rwgk["BYTES"])
    assert shown["bundled_driver"] == "580.82.07"
    assert shown["compat_floor"] == "580.0"
    assert shown["sources"]["sha256"] == "spack"
    assert shown["sources"]["md5"] == "rwgk"
    assert shown["sources"]["min_driver"] == "table3"


def test_every_spack_sha256_and_rwgk_md5_is_in_the_catalog():
    catalog = load_catalog()
    platforms = {"Linux-x86_64": "linux-x86_64", "Linux-aarch64": "linux-sbsa"}
    checked = 0
    for row in _tsv("spack-cuda-runfile-sha256.tsv"):
        release = catalog.find(row["version"])
        if row["platform"] not in platforms or release is None:
            continue
        rf = release.runfile(platforms[row["platform"]])
        assert rf is not None and rf.sha256 == row["sha256"], row
        assert rf.url == row["url"]
        checked += 1
    assert checked >= 100
    for row in _tsv("nvidia-runfile-md5-size-rwgk-catalog.tsv"):
        platform = {"linux-amd64": "linux-x86_64", "linux-arm64": "linux-sbsa"}
        rf = catalog.get(row["VERSION"]).runfile(platform[row["PLATFORM"]])
        assert rf is not None
        assert (rf.runfile, rf.md5, rf.size) == (
            row["FILENAME"], row["MD5"], int(row["BYTES"]))


def test_min_driver_is_table3_and_never_guessed():
    catalog = load_catalog()
    table3 = {r["toolkit"]: r["min_driver_linux"]
              for r in _tsv("nvidia-cuda-min-driver-table3.tsv")}
    for release in catalog.releases:
        assert release.min_driver == table3.get(release.version), release.version
    # 13.0.3 is not in Table 3: unknown, not borrowed from 13.0.2
    assert catalog.get("13.0.3").min_driver is None
    # the bundled driver is not the minimum (the file header's example)
    assert catalog.get("12.8.0").min_driver == "570.26"
    assert catalog.get("12.8.0").runfile().bundled_driver == "570.86.10"


def test_missing_values_are_null_with_no_source():
    catalog = load_catalog()
    rf = catalog.get("12.9.2").runfile()  # in rwgk only, not in spack
    assert rf is not None and rf.sha256 is None and "sha256" not in rf.sources
    assert rf.md5 == "9b91ed7b1fb15f2ba42b94135dbc95b8"
    assert catalog.get("11.8.0").compat_floor is None  # Table 2 quoted for 12/13 only
    assert catalog.get("12.0.0").compat_floor == "525.0"


def test_sbsa_runfiles():
    release = load_catalog().get("13.0.1")
    rf = release.runfile("linux_aarch64")
    assert rf is not None
    assert rf.runfile == "cuda_13.0.1_580.82.07_linux_sbsa.run"
    assert rf.sha256 == (
        "927e2c2a6a3e0d12e7e93df10dad6d8f3c688b9e27e9d2034f82d437ec2d2666")


def test_unknown_toolkit_lists_the_ones_that_exist():
    with pytest.raises(CudaError) as info:
        load_catalog().get("13.0.9")
    assert "13.0.9" in info.value.message
    assert info.value.hint is not None
    assert "13.0.1" in info.value.hint and "13.0.3" in info.value.hint


def test_show_a_series_shows_each_of_its_releases(
        capsys: pytest.CaptureFixture[str]):
    assert main(["cuda", "show", "13.0", "--json"]) == 0
    shown = [r["version"] for r in
             parse_output(capsys.readouterr().out, "cuda-show")["releases"]]
    series = [v for v in load_catalog().versions() if v.startswith("13.0.")]
    assert shown == series and len(series) >= 2
    assert main(["cuda", "show", "13.0"]) == 0
    text = capsys.readouterr().out
    assert [line.split()[1] for line in text.splitlines()
            if line.startswith("CUDA ")] == series


def test_cli_show_unknown_version_exits_2(capsys: pytest.CaptureFixture[str]):
    assert main(["cuda", "show", "99.1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "99.1" in err


def test_list_json_and_text(capsys: pytest.CaptureFixture[str]):
    assert main(["cuda", "list", "--json"]) == 0
    rows = parse_output(capsys.readouterr().out, "cuda-list")["releases"]
    assert [r["version"] for r in rows] == load_catalog().versions()
    text = render_releases(load_catalog())
    line = next(ln for ln in text.splitlines() if ln.startswith("13.0.1 "))
    assert "cuda_13.0.1_580.82.07_linux.run" in line and "580.82.07" in line


def test_shipped_file_is_what_the_sources_give():
    build = _build_module()
    shipped = (ROOT / "stacklock" / "data" / "cuda_releases.json").read_bytes()
    assert build.render(build.build()) == shipped


def test_catalog_round_trips_to_the_same_bytes():
    shipped = (ROOT / "stacklock" / "data" / "cuda_releases.json").read_bytes()
    catalog = parse_catalog(json.loads(shipped))
    again = (json.dumps(catalog.to_dict(), indent=1) + "\n").encode()
    assert again == shipped


def test_unknown_schema_is_an_error():
    with pytest.raises(CudaError, match="schema"):
        parse_catalog({"schema": 2, "releases": []})


def test_a_series_is_not_a_release_unless_asked_for():
    catalog = load_catalog()
    with pytest.raises(CudaError, match="names a series") as info:
        catalog.get("13.0")
    assert info.value.hint == "one of 13.0.3, 13.0.2, 13.0.1, 13.0.0"
    assert catalog.get("13.1", series=True).version == "13.1.0"
    assert catalog.get("12", series=True).version == "12.0.0"
