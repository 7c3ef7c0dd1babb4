"""Regenerate the real uv locks in tests/data/diff/ that the diff tests read.

Runs ``uv pip compile --format pylock.toml`` against real PyPI for two SGLang 0.5.9
stacks: the CUDA 12.8 one (torch 2.9.1, whose PyPI wheels are cu128) and the CUDA 13
one (torch 2.11.0, whose PyPI wheels are cu130, forced under sglang 0.5.9 with
overrides). ``--exclude-newer`` fixes the answer, so a
rerun gives the same packages as long as PyPI keeps the files.

    .venv/bin/python scripts/record_diff_locks.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "tests" / "data" / "diff"
EXCLUDE_NEWER = "2026-12-01T00:00:00Z"


def compile_args(exclude_newer: str) -> list[str]:
    """``uv pip compile`` for stacklock's default target against real PyPI."""
    return [
        "pip", "compile", "--quiet", "--format", "pylock.toml",
        "--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_28",
        "--exclude-newer", exclude_newer, "--index-url", "https://pypi.org/simple",
    ]  # fmt: skip


STACKS = {
    "cu128": {
        "requirements-cu128.in": [
            "torch==2.9.1",
            "flashinfer-python==0.6.3",
            "sglang==0.5.9",
            "sgl-kernel==0.3.21",
        ],
    },
    "cu130": {
        "requirements-cu130.in": ["sglang==0.5.9", "sgl-kernel==0.3.21"],
        "overrides-cu130.txt": [
            "torch==2.11.0",
            "torchaudio==2.11.0",
            "torchvision==0.26.0",
            "flashinfer-python==0.6.4",
            "flashinfer-cubin==0.6.4",
            "cuda-python>=13.0",
        ],
    },
}


def find_uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        raise SystemExit("uv not found; install the project with pip install -e .")
    return found


def main() -> int:
    HERE.mkdir(parents=True, exist_ok=True)
    for name, files in STACKS.items():
        args = [find_uv(), *compile_args(EXCLUDE_NEWER)]
        for filename, lines in files.items():
            (HERE / filename).write_text("\n".join(lines) + "\n")
            args += ["--override", filename] if "overrides" in filename else [filename]
        args += ["-o", f"pylock.{name}.toml"]
        # uv prefers the pins of an existing output file; start from nothing
        (HERE / f"pylock.{name}.toml").unlink(missing_ok=True)
        print("+", " ".join(args[1:]), flush=True)
        subprocess.run(args, cwd=HERE, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
