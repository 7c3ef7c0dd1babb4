"""A mistyped project name is named as one, with the names the index lists that
are close to it, instead of "loosen the range of versions": from a simple
index's real root page over HTTP (SGLang's cu130 wheel index), from a find-links
folder of real wheels, and not at all where the index lists nothing close."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stacklock.cli import main
from tests.helpers.data import DATA

SGL_ROOT = "real/sgl-project-whl-gh-pages/cu130"


def _profile(path: Path, url: str, package: str, *, kind: str = "simple") -> Path:
    path.write_text(f'[[index]]\nname = "here"\nurl = "{url}"\nkind = "{kind}"\n'
                    f'[requirements]\npackages = ["{package}"]\n')
    return path


def _resolve(profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
             monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["resolve", str(profile), "-o", str(tmp_path / "out.toml")]) == 1
    err = capsys.readouterr().err
    assert not (tmp_path / "out.toml").exists()
    return err


def test_a_typo_on_a_simple_index_gets_the_close_names_of_its_root(
        tmp_path: Path, local_index: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    profile = _profile(tmp_path / "typo.toml", f"{local_index}/{SGL_ROOT}",
                       "sgl-kernal==0.3.21")
    err = _resolve(profile, tmp_path, capsys, monkeypatch)
    assert "no index has a project named sgl-kernal (did you mean sgl-kernel?)" \
        in err
    steps = err.split("To fix this you could try to:\n")[1].splitlines()
    assert steps[0] == "    1. correct the name sgl-kernal (the indexes list " \
        "sgl-kernel)"
    assert "loosen" not in err


def test_a_typo_in_a_find_links_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    profile = _profile(tmp_path / "typo.toml", str(DATA / "install" / "wheels"),
                       "sixx", kind="flat")
    err = _resolve(profile, tmp_path, capsys, monkeypatch)
    assert "(did you mean six?)" in err and "loosen" not in err


def test_nothing_close_says_so(
        tmp_path: Path, local_index: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    profile = _profile(tmp_path / "far.toml", f"{local_index}/{SGL_ROOT}",
                       "numpy")
    err = _resolve(profile, tmp_path, capsys, monkeypatch)
    assert "did you mean" not in err
    assert re.search(r"1\. check the name numpy: no index lists it", err)
