"""Record the install test data from real PyPI: a uv-compiled lock + its wheels.

Run from the repository root:  .venv/bin/python tests/data/install/record.py
It resolves three small pure-Python projects with `uv pip compile --format
pylock.toml` (real PyPI), downloads each locked wheel and checks it against the
lock's sha256. Tests serve the wheels from a loopback server with the lock's URLs
rewritten to it, so they run offline.
"""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from pathlib import Path

import httpx
from uv import find_uv_bin

HERE = Path(__file__).resolve().parent
REQUIREMENTS = ["six==1.17.0", "idna==3.20", "iniconfig==2.3.1"]


def main() -> None:
    req = HERE / "requirements.in"
    req.write_text("\n".join(REQUIREMENTS) + "\n")
    lock = HERE / "pylock.small.toml"
    subprocess.run(
        [find_uv_bin(), "pip", "compile", "--quiet", "--no-header",
         "--python-version", "3.11", "--format", "pylock.toml",
         "--exclude-newer", "2026-12-01T00:00:00Z",
         str(req), "-o", str(lock)],
        check=True,
    )  # fmt: skip
    data = tomllib.loads(lock.read_text("utf-8"))
    with httpx.Client(follow_redirects=True, timeout=60) as http:
        for pkg in data["packages"]:
            for wheel in pkg["wheels"]:
                url = wheel["url"]
                body = http.get(url).raise_for_status().content
                sha = hashlib.sha256(body).hexdigest()
                assert sha == wheel["hashes"]["sha256"], url
                (HERE / "wheels" / url.rsplit("/", 1)[-1]).write_bytes(body)
                print(f"{url.rsplit('/', 1)[-1]}  {len(body)} bytes  {sha}")


if __name__ == "__main__":
    main()
