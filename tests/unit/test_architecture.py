"""The layers of docs/architecture.md hold: ``lint-imports`` checks the contracts in
pyproject.toml (cli on top, verbs in the middle using each other only where named,
shared models below, foundations at the bottom, no import cycles)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept() -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent /
                                               "lint-imports")
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
