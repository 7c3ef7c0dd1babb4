"""The native check inside the resolution, over recorded real PyPI traffic
(tests/data/resolve/cassettes/, scripts/record_resolution.py --check) and the
recorded facts of every wheel those resolutions lock (tests/data/native/): a
candidate that would not load is passed over like one with an unsatisfiable
requirement, and the lock says why; when nothing else is left, the refusal names
what was tried."""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest
from packaging.version import Version

from stacklock.cli import main
from stacklock.errors import NativeCheckError
from stacklock.http import make_http_client
from stacklock.lock import load_lock
from stacklock.native.sources import SourceReader
from stacklock.native.wheel import WheelReader
from stacklock.profile import load_profile
from stacklock.resolve.locking import NativeGate, lock_profile, render_resolve
from stacklock.resolve.moves import kept_from_lock
from stacklock.resolve.resolution import resolve_profile
from tests.helpers.cassette import Layered, ReplayTransport, seed_metadata
from tests.helpers.data import DATA
from tests.helpers.jsonout import parse_output
from tests.helpers.native_facts import NATIVE, load_facts, load_import_facts

PROFILES = NATIVE / "profiles"
CASSETTES = DATA / "resolve" / "cassettes"


@pytest.fixture
def facts_cache(tmp_path):
    """A cache that holds the recorded facts of every wheel, and what each
    consumer's modules import, so no wheel is read."""
    cache = tmp_path / "cache"
    with make_http_client() as http:
        reader = WheelReader(http, cache_dir=cache, offline=True)
        for _wheel, natives in load_facts().values():
            reader.remember(natives)
        sources = SourceReader(http, cache_dir=cache, offline=True)
        for facts in load_import_facts():
            sources.remember(facts)
    return cache


def _lock(name: str, out, cache, *cassettes: str):
    transport = ReplayTransport(CASSETTES / cassettes[0])
    for more in cassettes[1:]:
        transport = Layered(ReplayTransport(CASSETTES / more), transport)
    with make_http_client(transport=transport) as http:
        return lock_profile(str(PROFILES / f"{name}.toml"), output=out, http=http,
                            cache_dir=cache)


def test_torchaudio_2_11_1_is_passed_over_for_2_11_0_and_the_lock_says_why(
        tmp_path, facts_cache):
    out = tmp_path / "pylock.toml"
    result = _lock("torch211-newest-audio-vision", out, facts_cache,
                   "torch211-newest-audio-vision")
    pins = result.resolution.pins()
    assert pins["torch"] == "2.11.0" and pins["torchaudio"] == "2.11.0"
    assert pins["torchvision"] == "0.26.0"
    assert result.native is not None and result.native.ok
    assert result.native.bytes_read == 0  # every wheel from the facts
    [passed] = result.resolution.passed_over
    assert (passed.name, str(passed.version)) == ("torchaudio", "2.11.1")
    assert "torch_exception_get_what" in passed.reason
    assert "torch 2.11.0" in passed.reason
    written = tomllib.loads(out.read_text())["tool"]["stacklock"]["check"]
    assert written["passed-over"] == [{"package": "torchaudio", "version": "2.11.1",
                                       "reason": passed.reason}]
    stack = load_lock(out).stack
    assert stack is not None and stack.check_passed_over == tuple(
        written["passed-over"])
    assert "passed over torchaudio 2.11.1 (it would not load)" in render_resolve(
        result)


def test_when_no_version_loads_the_refusal_names_what_was_tried(tmp_path,
                                                                facts_cache):
    out = tmp_path / "pylock.toml"
    with pytest.raises(NativeCheckError) as caught:
        _lock("torch211-xformers035", out, facts_cache,
              "torch211-newest-audio-vision", "torch211-xformers035")
    text = str(caught.value)
    assert caught.value.exit_code == 1 and not out.exists()
    assert "no combination of versions loads" in text
    assert "xformers 0.0.35: xformers/_C.so needs libcudart.so.12" in text
    assert "nvidia-cuda-runtime 13.0.96 ships libcudart.so.13" in text


CUDNN_WARNING = {
    "package": "cupy-cuda12x", "version": "13.4.1",
    "module": "cupy_backends.cuda.libs.cudnn",
    "reason": "needs libcudnn.so.8 (nvidia-cudnn-cu12 9.10.2.21 ships libcudnn.so.9)"}


def test_a_module_no_import_loads_is_a_warning_the_lock_and_check_show(
        tmp_path, facts_cache, capsys, monkeypatch):
    """cupy's cuDNN module needs cuDNN 8 beside cuDNN 9; ``import cupy`` never
    imports it. No other combination exists (both pinned): the lock is
    written, with the warning, and ``stacklock check`` prints it and passes."""
    out = tmp_path / "pylock.toml"
    seed_metadata(CASSETTES / "cupy134-cudnn9", facts_cache)
    result = _lock("cupy134-cudnn9", out, facts_cache, "cupy134-cudnn9")
    assert result.native is not None and result.native.ok
    assert result.resolution.passed_over == ()
    assert [f.object for f in result.native.warnings] == [
        "cupy_backends/cuda/libs/cudnn.cpython-312-x86_64-linux-gnu.so"]
    written = tomllib.loads(out.read_text())["tool"]["stacklock"]["check"]
    assert written["warnings"] == [CUDNN_WARNING]
    stack = load_lock(out).stack
    assert stack is not None and stack.check_warnings == (CUDNN_WARNING,)
    line = ("native warning: cupy_backends.cuda.libs.cudnn (cupy-cuda12x 13.4.1) "
            "will not import: needs libcudnn.so.8 (nvidia-cudnn-cu12 9.10.2.21 "
            "ships libcudnn.so.9); no import of cupy-cuda12x loads it")
    assert line in render_resolve(result)
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(facts_cache))
    assert main(["check", str(out), "--offline"]) == 0
    shown = capsys.readouterr().out
    assert "native check passed" in shown and line in shown
    assert main(["check", str(out), "--offline", "--json"]) == 0
    report = parse_output(capsys.readouterr().out, "check")
    assert report["ok"] and not report["findings"]
    [warning] = report["warnings"]  # the same finding, said not to block
    assert (warning["package"], warning["object"], warning["blocking"]) == (
        "cupy-cuda12x", "cupy_backends/cuda/libs/cudnn.cpython-312-x86_64-linux-gnu.so",
        False)


def test_strict_makes_a_module_no_import_loads_block(tmp_path, facts_cache):
    profile = tmp_path / "cupy134-cudnn9.toml"
    profile.write_text((PROFILES / "cupy134-cudnn9.toml").read_text()
                       + "[check]\nstrict = true\n")
    seed_metadata(CASSETTES / "cupy134-cudnn9", facts_cache)
    with make_http_client(transport=ReplayTransport(
            CASSETTES / "cupy134-cudnn9")) as http, \
            pytest.raises(NativeCheckError) as caught:
        lock_profile(str(profile), output=tmp_path / "pylock.toml", http=http,
                     cache_dir=facts_cache)
    assert ("cupy-cuda12x 13.4.1: cupy_backends/cuda/libs/cudnn.cpython-312-"
            "x86_64-linux-gnu.so needs libcudnn.so.8") in str(caught.value)
    assert not (tmp_path / "pylock.toml").exists()


def test_the_provider_moves_when_the_consumer_has_no_other_release(tmp_path,
                                                                  facts_cache):
    """torchao==0.15.* has one release, built for CUDA 12 and torch 2.9; the
    newest torch is a CUDA 13 build. torch moves back (with its nvidia-*
    pins) to the newest release that loads torchao, and the lock says so."""
    out = tmp_path / "pylock.toml"
    seed_metadata(CASSETTES / "torchao015-torch", facts_cache)
    result = _lock("torchao015-torch", out, facts_cache, "torchao015-torch")
    pins = result.resolution.pins()
    assert (pins["torch"], pins["torchao"]) == ("2.10.0", "0.15.0")
    assert "nvidia-cuda-runtime-cu12" in pins and "nvidia-cuda-runtime" not in pins
    assert result.native is not None and result.native.ok
    assert not result.native.warnings
    [moved] = result.resolution.passed_over
    assert (moved.name, str(moved.version), moved.moved) == ("torch", "2.15.0", True)
    assert moved.reason == ("torchao 0.15.0 needs libcudart.so.12; chose torch "
                            "2.10.0 (CUDA 12.8)")
    written = tomllib.loads(out.read_text())["tool"]["stacklock"]["check"]
    assert written["passed-over"] == [{"package": "torch", "version": "2.15.0",
                                       "reason": moved.reason}]
    assert ("passed over torch 2.15.0 (for what needs another): torchao 0.15.0 "
            "needs libcudart.so.12") in render_resolve(result)


def test_a_provider_moves_back_to_the_newest_release_exporting_the_symbols(
        tmp_path, facts_cache):
    """bitsandbytes 0.44.* and torchao 0.9.* with an unpinned torch: torchao
    0.9.0 needs libcudart.so.12 beside torch 2.15.0 (CUDA 13), and beside
    torch 2.10.0 (CUDA 12.8) c10:: symbols it no longer exports; torchao
    0.9.* has no other release. torch moves back to 2.6.0, found by checking
    torchao's wheel beside four torch releases (a bisection of 2.9.1 ... 2.2.0,
    not a check of each), and the lock says why at each step."""
    for cassette in ("torchao015-torch", "bnb044-torchao09-torch"):
        seed_metadata(CASSETTES / cassette, facts_cache)
    profile = load_profile(str(PROFILES / "bnb044-torchao09-torch.toml"))
    transport = Layered(ReplayTransport(CASSETTES / "bnb044-torchao09-torch"),
                        ReplayTransport(CASSETTES / "torchao015-torch"))
    with make_http_client(transport=transport) as http:
        gate = NativeGate(profile, http=http, offline=True, cache_dir=facts_cache)
        try:
            resolution = resolve_profile(profile, http=http, cache_dir=facts_cache,
                                         gate=gate)
        finally:
            gate.stop()
    pins = resolution.pins()
    assert (pins["torch"], pins["torchao"], pins["bitsandbytes"]) == (
        "2.6.0", "0.9.0", "0.44.1")
    assert gate.report is not None and gate.report.ok
    assert not gate.report.warnings
    assert [(p.name, str(p.version), p.moved) for p in resolution.passed_over] == [
        ("torch", "2.15.0", True), ("torch", "2.10.0", True)]
    assert resolution.passed_over[1].reason == (
        "torchao 0.9.0 needs c10::Error::Error(c10::SourceLocation, std::"
        "basic_string<char, std::char_traits<char>, std::allocator<char> >); "
        "chose torch 2.6.0 (CUDA 12.4)")
    checked = sorted((w.version for w in gate.judged.values()
                      if w.package == "torch"), key=Version)
    # each set checked (2.15.0, 2.10.0, 2.6.0) and the releases read beside
    # torchao 0.9.0: 2.5.0 lacks symbols 2.10.0 has (too old), 2.7.x lack
    # only what 2.10.0 lacks (too new)
    assert checked == ["2.5.0", "2.6.0", "2.7.0", "2.7.1", "2.10.0", "2.15.0"]


def test_a_provider_release_whose_facts_cannot_be_had_is_not_tried(
        tmp_path, facts_cache):
    """Offline, with no facts of the torch releases the bisection would read
    beside torchao (nor of 2.6.0's set), none is tried: the resolve ends as
    it did before providers moved for symbols, torchao passed over and no
    combination left, never with "not cached"."""
    for cassette in ("torchao015-torch", "bnb044-torchao09-torch"):
        seed_metadata(CASSETTES / cassette, facts_cache)
    for key, (wheel, _natives) in load_facts().items():
        if key in {f"torch=={v}" for v in ("2.5.0", "2.6.0", "2.7.0", "2.7.1")}:
            (facts_cache / "native" / f"{wheel.sha256}.json.gz").unlink()
    profile = load_profile(str(PROFILES / "bnb044-torchao09-torch.toml"))
    transport = Layered(ReplayTransport(CASSETTES / "bnb044-torchao09-torch"),
                        ReplayTransport(CASSETTES / "torchao015-torch"))
    with make_http_client(transport=transport) as http, \
            pytest.raises(NativeCheckError) as caught:
        gate = NativeGate(profile, http=http, offline=True, cache_dir=facts_cache)
        try:
            resolve_profile(profile, http=http, cache_dir=facts_cache, gate=gate)
        finally:
            gate.stop()
    text = str(caught.value)
    assert text.startswith("no combination of versions loads: passed over")
    assert "torchao 0.9.0: torchao/_C.abi3.so needs c10::Error::Error(" in text
    assert "which torch 2.10.0 does not export" in text

def test_a_consumer_loads_whole_when_its_library_can_move_back(tmp_path,
                                                              facts_cache):
    """cupy-cuda12x 13.4.1 with cuDNN unpinned: beside the newest cuDNN (9)
    its cuDNN module would only warn; cuDNN moves back to 8 instead, where
    every module loads (warnings only when no such combination exists)."""
    out = tmp_path / "pylock.toml"
    for cassette in ("cupy134-cudnn9", "cupy134-cudnn"):
        seed_metadata(CASSETTES / cassette, facts_cache)
    result = _lock("cupy134-cudnn", out, facts_cache, "cupy134-cudnn9")
    pins = result.resolution.pins()
    assert (pins["cupy-cuda12x"], pins["nvidia-cudnn-cu12"]) == (
        "13.4.1", "8.9.7.29")
    assert result.native is not None and result.native.ok
    assert not result.native.warnings
    [moved] = result.resolution.passed_over
    assert (moved.name, str(moved.version), moved.moved) == (
        "nvidia-cudnn-cu12", "9.28.0.42", True)
    assert moved.reason == ("cupy-cuda12x 13.4.1 needs libcudnn.so.8; chose "
                            "nvidia-cudnn-cu12 8.9.7.29 (CUDA 12)")


def test_a_lock_that_stays_put_keeps_saying_why(tmp_path, facts_cache):
    """Resolving again over the lock starts from its pins: torch 2.10.0 is
    tried first and loads, torch 2.15.0 is never met again, and the lock
    keeps the entry that says why torch is where it is. It goes once what it
    explains moves (here, torchao)."""
    out = tmp_path / "pylock.toml"
    seed_metadata(CASSETTES / "torchao015-torch", facts_cache)
    first = _lock("torchao015-torch", out, facts_cache, "torchao015-torch")
    written = tomllib.loads(out.read_text())["tool"]["stacklock"]["check"]
    again = _lock("torchao015-torch", out, facts_cache, "torchao015-torch")
    assert again.resolution.pins() == first.resolution.pins()
    assert again.native is not None and again.native.ok
    assert again.native.bytes_read == 0 and not again.written  # the same bytes
    assert tomllib.loads(again.text)["tool"]["stacklock"]["check"] == written
    [kept] = again.resolution.passed_over
    assert (kept.name, str(kept.version), kept.kept) == ("torch", "2.15.0", True)
    assert ("passed over torch 2.15.0 (kept from the lock, with its pins): "
            "torchao 0.15.0 needs libcudart.so.12; chose torch 2.10.0 (CUDA 12.8)"
            ) in render_resolve(again)
    locked = {p.name: p.version for p in first.resolution.packages}
    moved = [replace(p, version=Version("0.14.1")) if p.name == "torchao" else p
             for p in first.resolution.packages]
    entries = written["passed-over"]
    assert kept_from_lock(entries, locked, moved, []) == []
    assert kept_from_lock(entries, locked, first.resolution.packages, []) == [kept]
