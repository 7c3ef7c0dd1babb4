"""Every requirement set ``uv pip compile`` locks gets a stacklock lock with the
same pins, CUDA library carriers included.

Offline: flashinfer-python 0.6.4 with torch 2.11.0 (the seeds' combination) over
its recorded PyPI traffic, against the pins uv chose from real PyPI at recording
time (tests/data/resolve/flashinfer-torch.uv.txt); and a CUDA 12/13 mix in a
profile without ``[cuda]``, which is locked with the mix recorded as a warning.
``live``: a few real sets against real PyPI, uv run beside stacklock, and a
Django application's 80 requirements (scripts/resolve_sets.toml [application]),
which resolvelib alone gave up on.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from stacklock.errors import CudaMixError
from stacklock.http import make_http_client
from stacklock.lock import load_lock
from stacklock.profile import CudaSpec, load_profile
from stacklock.resolve.locking import lock_profile, render_resolve
from stacklock.resolve.resolution import resolve_profile
from tests.helpers.cassette import Layered, ReplayTransport
from tests.helpers.uv import parse_pins, python312, uv_compile_pins

DATA = Path(__file__).resolve().parents[1] / "data" / "resolve"
CASES = DATA / "cases"
CASSETTES = DATA / "cassettes"
CUTOFF = "2026-12-02T00:00:00Z"  # flashinfer-torch.toml's exclude-newer


def _replay(*names: str) -> Layered:
    return Layered(*(ReplayTransport(CASSETTES / n) for n in names))


def _lock(profile: Path, out: Path, cache: Path, *cassettes: str):
    with make_http_client(transport=_replay(*cassettes)) as http:
        # check=False: the cassettes hold pages and METADATA, not wheel bytes
        return lock_profile(str(profile), output=out, http=http, cache_dir=cache,
                            check=False)


def test_flashinfer_with_torch_locks_the_pins_uv_locks(tmp_path: Path) -> None:
    out = tmp_path / "pylock.flashinfer-torch.toml"
    result = _lock(CASES / "flashinfer-torch.toml", out, tmp_path / "cache",
                   "torch-cu130", "flashinfer-torch")
    uv = parse_pins((DATA / "flashinfer-torch.uv.txt").read_text())
    assert result.resolution.pins() == uv
    assert len(uv) == 51
    lock = load_lock(out)
    assert lock.stack is not None
    (note,) = lock.stack.cuda_notes
    assert (note.package, note.level, note.cuda) == ("nvidia-cutlass-dsl", "carried",
                                                     "12")
    assert "beside its twin nvidia-cutlass-dsl-libs-cu13" in note.message
    assert ("cuda carried: nvidia-cutlass-dsl: requires "
            "nvidia-cutlass-dsl-libs-cu12==4.8.1 (CUDA 12)") in render_resolve(result)


def test_a_declared_cuda_13_toolkit_takes_the_carrier_too(tmp_path: Path) -> None:
    profile = tmp_path / "flashinfer-torch.toml"
    profile.write_text((CASES / "flashinfer-torch.toml").read_text()
                       + '[cuda]\ntoolkit = "13.0.1"\n')
    result = _lock(profile, tmp_path / "pylock.toml", tmp_path / "cache",
                   "torch-cu130", "flashinfer-torch")
    levels = {(f.package, f.level) for f in result.resolution.coherence}
    assert ("nvidia-cutlass-dsl", "carried") in levels
    assert ("torch", "ok") in levels
    # a CUDA 12 toolkit is another matter: the wheels target CUDA 13
    twelve = replace(load_profile(str(profile)), cuda=CudaSpec(toolkit="12.8.1"))
    transport = _replay("torch-cu130", "flashinfer-torch")
    with make_http_client(transport=transport) as http, \
            pytest.raises(CudaMixError, match=r"toolkit 12\.8\.1 is CUDA 12"):
        resolve_profile(twelve, http=http, cache_dir=tmp_path / "cache")


def test_without_cuda_a_mix_is_locked_and_recorded_as_a_warning(
        tmp_path: Path) -> None:
    """cuda-mix.toml less its [cuda]: nvidia-cutlass-dsl without [cu13] brings
    only the CUDA 12 libraries beside torch 2.11 (CUDA 13.0). The toolkit-declaring
    case is refused (test_resolve.py); without one, uv locks it, and so do we."""
    text = (CASES / "cuda-mix.toml").read_text()
    profile = tmp_path / "cuda-mix.toml"
    profile.write_text(text[: text.index("[cuda]")])
    out = tmp_path / "pylock.cuda-mix.toml"
    result = _lock(profile, out, tmp_path / "cache", "torch-cu130", "cuda-mix")
    notes = {n.package: n for n in load_lock(out).stack.cuda_notes}
    assert {"nvidia-cutlass-dsl", "torch"} <= set(notes)
    assert {n.level for n in notes.values()} == {"warning"}
    assert notes["nvidia-cutlass-dsl"].cuda == "12" and notes["torch"].cuda == "13.0"
    assert "not refused because the profile declares no [cuda] toolkit" in (
        notes["torch"].message)
    assert "cuda warning: nvidia-cutlass-dsl: targets CUDA 12" in render_resolve(
        result)


LIVE_SETS = {
    "flashinfer-torch": ["flashinfer-python==0.6.4", "torch==2.11.0"],
    "cuda13-torch-2.11": ["torch==2.11.0", "torchvision", "torchaudio"],
    "jax-cuda13": ["jax[cuda13]"],
}


@pytest.mark.live
@pytest.mark.parametrize("name", sorted(LIVE_SETS))
def test_live_pins_equal_uv_pip_compile(name: str, tmp_path: Path) -> None:
    """Metadata only on both sides (PEP 658 files and range reads): a few MB."""
    reqs = LIVE_SETS[name]
    profile = tmp_path / f"{name}.toml"
    profile.write_text(
        '[target]\npython = "3.12"\nplatform = "linux_x86_64"\nmanylinux = "2_28"\n'
        f"[requirements]\npackages = {json.dumps(reqs)}\n"
        f'exclude-newer = "{CUTOFF}"\n')
    # check=False: the native check would read torch's shared objects (hundreds
    # of MB of ranges); the pins are what this compares
    result = lock_profile(str(profile), output=tmp_path / "pylock.toml",
                          cache_dir=tmp_path / "cache", check=False)
    assert result.resolution.pins() == uv_compile_pins(reqs, tmp_path,
                                                       exclude_newer=CUTOFF)


@pytest.mark.live
def test_live_a_django_application_locks_the_pins_uv_locks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """131 packages, one built from its sdist (pyuwsgi 2.0.20, a CPython 3.12
    needed on both sides: one installed but off PATH is put first on it)."""
    python = Path(python312(tmp_path))  # skips, saying why, if none here
    monkeypatch.setenv("PATH", f"{python.parent}:{os.environ['PATH']}")
    sets = tomllib.loads((Path(__file__).resolve().parents[2] / "scripts"
                          / "resolve_sets.toml").read_text())
    reqs = sets["application"]["sentry-base"]
    profile = tmp_path / "sentry-base.toml"
    profile.write_text(
        '[target]\npython = "3.12"\nplatform = "linux_x86_64"\nmanylinux = "2_28"\n'
        f"[requirements]\npackages = {json.dumps(reqs)}\n"
        f'exclude-newer = "{CUTOFF}"\n')
    result = lock_profile(str(profile), output=tmp_path / "pylock.toml",
                          cache_dir=tmp_path / "cache", check=False)
    pins = result.resolution.pins()
    assert len(pins) > 120
    assert pins == uv_compile_pins(reqs, tmp_path, exclude_newer=CUTOFF)
