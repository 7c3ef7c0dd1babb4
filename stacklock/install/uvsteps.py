"""The two uv commands that build one generation, and the name of the lock copy
they install from: shared by the install plan and uv's head start, which starts
them before the plan is made (so this module imports next to nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["BUILD_CONFIG_NAME", "UV_LOCK_NAME", "uv_commands"]

UV_LOCK_NAME = "pylock.install.toml"  # the copy of the lock uv installs from
BUILD_CONFIG_NAME = "uv-build.toml"  # beside it: uv's config for match-runtime builds


def uv_commands(uv: str, python: str, generation_dir: Path, uv_lock: Path,
                build: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """``uv venv`` and ``uv pip sync`` of one generation, in that order."""
    return (
        (uv, "venv", "--python", python, str(generation_dir)),
        (
            uv, "pip", "sync", "--python", str(generation_dir / "bin" / "python"),
            "--require-hashes", *build, "--preview-features", "pylock", str(uv_lock),
        ),
    )  # fmt: skip
