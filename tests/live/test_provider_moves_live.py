"""Live: the minimal reproductions of a consumer built for CUDA 12 beside an
unpinned torch whose newest release is a CUDA 13 build, resolved against real
PyPI with the native check (about 500 MB of wheel ranges, cached by sha256
under ``$STACKLOCK_LIVE_CACHE``): torch moves back to a CUDA 12 build and the
check is clean; the true positives with a pinned torch still block."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stacklock.errors import NativeCheckError
from stacklock.resolve.locking import lock_profile
from tests.helpers.native_facts import NATIVE

pytestmark = pytest.mark.live

LIVE = Path(os.environ.get("STACKLOCK_LIVE_CACHE",
                           Path.home() / ".cache" / "stacklock-live"))
CUTOFF = "2026-12-01T00:00:00Z"


def _profile(tmp_path: Path, packages: list[str]) -> Path:
    path = tmp_path / "live.toml"
    quoted = ", ".join(f'"{p}"' for p in packages)
    path.write_text('[target]\npython = "3.12"\nplatform = "linux_x86_64"\n'
                    f'manylinux = "2_28"\n[requirements]\npackages = [{quoted}]\n'
                    f'exclude-newer = "{CUTOFF}"\n')
    return path


@pytest.mark.parametrize("packages", [
    ["torchao==0.15.*", "torch"],
    ["onnxruntime-gpu>=1.19.2,<1.20", "torchvision"],
])
def test_a_cuda_12_consumer_moves_torch_to_a_cuda_12_build(tmp_path, packages):
    result = lock_profile(str(_profile(tmp_path, packages)),
                          output=tmp_path / "pylock.toml", cache_dir=LIVE / "stacklock")
    assert result.native is not None and result.native.ok
    assert not result.native.warnings
    torch = next(p for p in result.resolution.packages if p.name == "torch")
    assert torch.cuda is not None and torch.cuda.startswith("12.")
    assert any(p.moved for p in result.resolution.passed_over)


@pytest.mark.parametrize("profile", ["torch211-torchaudio211", "torch211-xformers035"])
def test_the_true_positives_with_torch_pinned_still_block(tmp_path, profile):
    text = (NATIVE / "profiles" / f"{profile}.toml").read_text()
    if profile == "torch211-torchaudio211":  # the release that does not load
        text = text.replace('"torchaudio==2.11.0"', '"torchaudio==2.11.1"').replace(
            "2026-11-01", "2026-12-03")
    path = tmp_path / f"{profile}.toml"
    path.write_text(text)
    with pytest.raises(NativeCheckError):
        lock_profile(str(path), output=tmp_path / "pylock.toml",
                     cache_dir=LIVE / "stacklock")
