"""``stacklock check LOCK`` and ``[check]`` in profiles, on facts recorded from real
wheels put in the cache (so --offline reads no network)."""

from __future__ import annotations

import json

import httpx
import pytest

from stacklock.cli import main
from stacklock.errors import ProfileError
from stacklock.native.wheel import WheelReader
from stacklock.profile import parse_profile
from tests.helpers.jsonout import parse_output
from tests.helpers.native_facts import load_facts

TORCH = ("torch==2.11.0", "nvidia-cuda-runtime==13.0.96")


def _lock(tmp_path, keys, *, allow=()):
    facts = load_facts()
    reader = WheelReader(httpx.Client(), cache_dir=tmp_path / "cache")
    lines = ['lock-version = "1.0"', 'created-by = "stacklock"', ""]
    for key in keys:
        wheel, natives = facts[key]
        reader.remember(natives)
        lines += ["[[packages]]", f"name = {json.dumps(wheel.package)}",
                  f"version = {json.dumps(wheel.version)}", "",
                  "[[packages.wheels]]", f"name = {json.dumps(wheel.filename)}",
                  f"url = {json.dumps(wheel.url)}",
                  f'hashes = {{sha256 = "{wheel.sha256}"}}', ""]
    lines += ["[tool.stacklock]", "lock-version = 1",
              'target = {python = "3.12", platform = "linux_x86_64", '
              'manylinux = "2_28"}', ""]
    if allow:
        lines += ["[tool.stacklock.check]", f"allow = {json.dumps(list(allow))}"]
    path = tmp_path / "pylock.test.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))


def test_check_refuses_torchaudio_for_cuda_12_with_exit_1(tmp_path, cache, capsys):
    lock = _lock(tmp_path, (*TORCH, "torchaudio==2.9.1"))
    assert main(["check", str(lock), "--offline"]) == 1
    out = capsys.readouterr().out
    assert "native check failed" in out
    assert ("torchaudio 2.9.1: torchaudio/lib/libtorchaudio.so needs "
            "libcudart.so.12") in out


def test_check_json_lists_findings_and_bytes(tmp_path, cache, capsys):
    lock = _lock(tmp_path, (*TORCH, "torchvision==0.27.0"))
    assert main(["check", str(lock), "--offline", "--json"]) == 1
    report = parse_output(capsys.readouterr().out)
    assert report["ok"] is False and report["bytes_read"] == 0
    assert {f["kind"] for f in report["findings"]} == {"symbol"}
    assert {f["counterpart"] for f in report["findings"]} == {"torch 2.11.0"}


def test_check_passes_a_matching_pair(tmp_path, cache, capsys):
    lock = _lock(tmp_path, (*TORCH, "torchaudio==2.11.0"))
    assert main(["check", str(lock), "--offline"]) == 0
    out = capsys.readouterr().out
    assert "native check passed" in out and "3 wheels, 17 shared objects" in out


def test_the_locks_allow_list_is_honoured_and_shown(tmp_path, cache, capsys):
    lock = _lock(tmp_path, (*TORCH, "torchaudio==2.9.1"), allow=("torchaudio",))
    assert main(["check", str(lock), "--offline", "-v"]) == 0
    shown = capsys.readouterr().out
    assert "allowed by [check] allow: torchaudio 2.9.1" in shown
    # by default one line a phase: the allowed objects counted, not listed
    assert main(["check", str(lock), "--offline"]) == 0
    brief = capsys.readouterr().out.splitlines()
    allowed = shown.count("allowed by [check] allow: ")
    assert len(brief) == 2 and f"; {allowed} allowed by [check] allow" in brief[1]


def test_bad_input_is_one_line_exit_2(tmp_path, cache, capsys):
    assert main(["check", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such lock file" in err
    lock = _lock(tmp_path, (*TORCH,))
    for entry in (tmp_path / "cache" / "native").rglob("*.json.gz"):
        entry.unlink()
    assert main(["check", str(lock), "--offline"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not cached" in err


def _profile(check):
    return {"requirements": {"packages": ["torch"]}, "check": check}


def test_profile_check_allow_is_normalised_and_checked():
    profile = parse_profile(_profile({"allow": ["Torch_C_DLPack.Ext"]}), name="p")
    assert profile.check.allow == ("torch-c-dlpack-ext",)
    with pytest.raises(ProfileError, match=r"check\.alow"):
        parse_profile(_profile({"alow": ["x"]}), name="p", path="p.toml")
    with pytest.raises(ProfileError, match=r"check\.allow"):
        parse_profile(_profile({"allow": "torchaudio"}), name="p", path="p.toml")
