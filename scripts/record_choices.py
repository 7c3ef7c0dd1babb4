"""Record the real wheels the resolver-choice tests resolve from, offline.

    .venv/bin/python scripts/record_choices.py

Downloads each wheel below with ``pip download --no-deps --only-binary :all:``
(PyPI, pip's own hash check) into tests/data/resolve/choices/, and writes
PROVENANCE.md there with each file's size and sha256. Several versions of one
project side by side are what a choice needs: a folder index of them, read with
no request at all, where a wrong choice can only be an assertion, never a
recorded replay that lacks the request.
"""

from __future__ import annotations

import datetime
import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "resolve" / "choices"
WHEELS = ("six==1.15.0", "six==1.16.0", "six==1.17.0",
          "iniconfig==1.1.1", "iniconfig==2.0.0", "iniconfig==2.1.0",
          "python-dateutil==2.9.0.post0")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for spec in WHEELS:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet",
                        "--no-deps", "--only-binary", ":all:",
                        "--index-url", "https://pypi.org/simple", "-d", str(OUT),
                        spec], check=True)
    day = datetime.datetime.now(datetime.UTC).date().isoformat()
    lines = ["# Resolver-choice wheels", "",
             f"Downloaded {day} from https://pypi.org/simple by "
             "`scripts/record_choices.py` (pip download --no-deps --only-binary "
             ":all:), unchanged. The tests use this folder as a find-links index.",
             "", "| file | size | sha256 |", "|---|---|---|"]
    for path in sorted(OUT.glob("*.whl")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"| `{path.name}` | {path.stat().st_size} | `{digest}` |")
    (OUT / "PROVENANCE.md").write_text("\n".join(lines) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
