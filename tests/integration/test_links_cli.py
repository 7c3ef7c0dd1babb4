"""``stacklock links`` end to end: a folder, a file:// URL, a loopback https-like
index, and an unreachable index."""

from __future__ import annotations

import re

import pytest
from packaging.version import Version

from stacklock.cli import main
from tests.helpers.data import SGL_PAGES
from tests.helpers.jsonout import parse_output

SGL_CU130 = SGL_PAGES / "cu130"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))


def _json_links(capsys, *argv):
    assert main(["links", *argv, "--json"]) == 0
    return parse_output(capsys.readouterr().out, "links")["links"]


@pytest.mark.parametrize("index", [str(SGL_CU130), SGL_CU130.as_uri()])
def test_json_lists_every_link_with_a_verdict(capsys, index):
    rows = _json_links(capsys, "sgl-kernel", "--index", index)
    raw = (SGL_CU130 / "sgl-kernel/index.html").read_bytes()
    expected = re.findall(rb'#sha256=([0-9a-f]{64})"', raw)
    assert len(rows) == len(expected) == 50
    assert sorted(r["sha256"] for r in rows) == sorted(h.decode() for h in expected)
    for row in rows:
        assert {"filename", "version", "url", "sha256", "compatible",
                "reason"} <= set(row)
        assert isinstance(row["compatible"], bool)
        assert (row["reason"] is None) == row["compatible"]
        assert row["url"].startswith("https://github.com/sgl-project/whl/")
    assert sum(r["filename"] == "sgl_kernel-0.3.21+cu130-cp310-abi3-"
               "manylinux2014_x86_64.whl" for r in rows) == 5


def test_target_options_change_the_verdict(capsys):
    arm = _json_links(capsys, "sgl-kernel", "--index", str(SGL_CU130),
                      "--platform", "linux_aarch64", "--python", "3.12")
    assert {r["compatible"] for r in arm if "aarch64" in r["filename"]} == {True}
    assert {r["compatible"] for r in arm if "x86_64" in r["filename"]} == {False}


def test_text_table_over_http(capsys, local_index, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # a wide terminal: no filename is folded
    url = f"{local_index}/real/sgl-project-whl-gh-pages/cu130"
    assert main(["links", "sgl-kernel", "--index", f"sgl={url}", "--all"]) == 0
    out = capsys.readouterr().out
    assert "sgl_kernel-0.3.21+cu130-cp312-abi3-manylinux2014_x86_64.whl" in out
    assert "no tag fits cp312/manylinux_2_28_x86_64" in out
    assert out.splitlines()[0].startswith(f"sgl-kernel on sgl ({url})")
    assert re.search(r"50 links, (\d+) fit", out).group(1) == str(
        out.count("│ yes  │"))


def test_summary_by_default_newest_ten_versions(capsys):
    """Without --all: one row per version, newest 10, with its file counts;
    the totals agree with --json's rows."""
    rows = _json_links(capsys, "sgl-kernel", "--index", str(SGL_CU130))
    assert main(["links", "sgl-kernel", "--index", str(SGL_CU130)]) == 0
    out = capsys.readouterr().out.splitlines()
    versions = sorted({Version(r["version"]) for r in rows}, reverse=True)
    table = [line.split() for line in out[2:-1]]
    assert [Version(row[0]) for row in table] == versions[:10]
    for row in table:
        mine = [r for r in rows if r["version"] == row[0]]
        assert int(row[1]) == sum(r["filename"].endswith(".whl") for r in mine)
        assert int(row[3]) == sum(r["compatible"] for r in mine)
    fits = sum(r["compatible"] for r in rows)
    assert out[-1].startswith(f"{len(rows)} links in {len(versions)} versions, "
                              f"{fits} fit; {len(versions) - 10} older")
    assert len(out) == 13


def test_index_defaults_to_the_profiles_then_pypi(capsys, tmp_path, local_index):
    """--profile: the index the project is pinned to, and the profile's target;
    no --index and no --profile: PyPI (refused here: the offline cache is empty)."""
    url = f"{local_index}/real/sgl-project-whl-gh-pages/cu130"
    profile = tmp_path / "p.toml"
    profile.write_text(f"""[target]\npython = "3.12"\nplatform = "linux_aarch64"
[[index]]\nname = "sgl"\nurl = "{url}"\npackages = ["sgl-kernel"]
[[index]]\nname = "pypi"\n[requirements]\npackages = ["sgl-kernel"]\n""")
    rows = _json_links(capsys, "sgl-kernel", "--profile", str(profile))
    assert {r["index"] for r in rows} == {"sgl"}
    assert {r["compatible"] for r in rows if "x86_64" in r["filename"]} == {False}
    assert main(["links", "torch", "--offline"]) == 2
    assert "index 'pypi' (https://pypi.org/simple/torch/)" in capsys.readouterr().err


def test_unreachable_index_is_one_line_with_redacted_url(capsys):
    code = main(["links", "torch", "--index",
                 "mirror=http://bob:pa55@127.0.0.1:9/simple"])
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("\n") == 1 and "pa55" not in err
    assert "index 'mirror' (http://bob:***@127.0.0.1:9/simple/torch/)" in err
    assert "--index NAME=URL" in err


def test_bad_target_is_a_user_error(capsys):
    assert main(["links", "torch", "--index", str(SGL_CU130),
                 "--python", "2.7"]) == 2
    assert "python '2.7'" in capsys.readouterr().err


def test_every_dead_index_of_the_profile_is_named(capsys, tmp_path):
    from tests.integration.test_cli_exit_codes import _refused_url

    dead = {"dead-a": _refused_url(), "dead-b": _refused_url()}
    profile = tmp_path / "p.toml"
    profile.write_text("".join(f'[[index]]\nname = "{n}"\nurl = "{u}"\n'
                               for n, u in dead.items())
                       + '[requirements]\npackages = ["six"]\n')
    assert main(["links", "six", "--profile", str(profile)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "stacklock: error: 2 indexes did not answer:"
    assert [line.split("'")[1] for line in err[1:]] == ["dead-a", "dead-b"]
