"""Record the logs of real metadata builds that fail on the target Python.

Each release below is an sdist whose build uses something Python 3.12 took out
of the standard library: pathtools 0.1.2's setup.py imports ``imp``, numpy
1.23.5 pins a setuptools that imports ``distutils`` (pypa/build then says only
that the backend "is not available"), Theano 1.0.5's uses
``configparser.SafeConfigParser``. Each is resolved by ``stacklock resolve``
for CPython 3.12 against real PyPI with an empty cache; the build log it
leaves is copied into tests/data/sdist/build-logs/ with the machine's paths
replaced (``<build>``, ``<python>``, ``<stdlib>``, ``<hooks>``, ``<uv>``,
``<tmp>``), and PROVENANCE.md there
says when and how.

    .venv/bin/python scripts/record_build_logs.py

Needs a CPython 3.12 that ``uv python find 3.12`` finds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from _sets import profile_text  # noqa: E402

OUT = ROOT / "tests" / "data" / "sdist" / "build-logs"
RELEASES = ["pathtools==0.1.2", "numpy==1.23.5", "theano==1.0.5"]
CUTOFF = "2026-12-01T00:00:00Z"


_START = r"(?:(?<=[\s\"'(])|^)"  # a path starts a word


def scrub(text: str) -> str:
    """The log with this machine's paths replaced by what they are."""
    for pattern, name in (
            (r"/\S*/stacklock-build-[^/\s]+", "<build>"),
            (r"/\S*/pyproject_hooks/", "<hooks>/"),
            (r"/\S*/bin/python3\.\d+", "<python>"),
            (r"/\S*/lib/python3\.\d+/", "<stdlib>/"),
            (r"/\S*/bin/uv(?=\s)", "<uv>"),
            (r"/\S*/tmp\w+", "<tmp>")):
        text = re.sub(_START + pattern, name, text, flags=re.M)
    return text


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for release in RELEASES:
        with tempfile.TemporaryDirectory(prefix="record-build-logs-") as tmp:
            work = Path(tmp)
            profile = work / "build.toml"
            profile.write_text(profile_text([release], exclude_newer=CUTOFF))
            proc = subprocess.run(
                [sys.executable, "-m", "stacklock.cli", "resolve", str(profile),
                 "-o", str(work / "pylock.toml"), "--no-check"],
                capture_output=True, text=True, check=False,
                env={**os.environ, "STACKLOCK_CACHE_DIR": str(work / "cache")})
            logs = list((work / "cache" / "logs").glob("build-*.log"))
            if len(logs) != 1:
                sys.exit(f"{release}: no build log ({proc.stderr.strip()[-300:]})")
            log = logs[0]
            (OUT / log.name).write_text(scrub(log.read_text()))
            rows.append(f"- `{log.name}`: {release}, exit {proc.returncode}")
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")
    (OUT / "PROVENANCE.md").write_text(
        "# tests/data/sdist/build-logs\n\n"
        f"Recorded {when} by `scripts/record_build_logs.py`: the log `stacklock "
        "resolve` wrote while preparing each release's metadata for CPython 3.12 "
        "(uv venv, uv pip install of its build requirements, the PEP 517 hooks) "
        f"against https://pypi.org/simple with --exclude-newer {CUTOFF}; this "
        "machine's paths are replaced by `<build>` (the build folder), `<python>` "
        "(the interpreter), `<stdlib>` (its standard library), `<hooks>` "
        "(pyproject_hooks' folder), `<uv>` and `<tmp>` (a temporary folder), "
        "nothing else is changed.\n\n" + "\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
