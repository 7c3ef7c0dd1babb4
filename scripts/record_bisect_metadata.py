"""Record the METADATA that bisect's grouping test reads, into tests/data/bisect/.

For every package that differs between the two real uv locks of tests/data/diff/
(SGLang 0.5.9 on torch 2.9.1 / CUDA 12.8 and on torch 2.11.0 / CUDA 13), at each end
where it is locked, the METADATA file of the first wheel the lock lists, read from
files.pythonhosted.org by stacklock's own reader (PEP 658 where PyPI has it, else
range reads of the wheel) and stored under the wheel's sha256 as its metadata cache
keys it (``<sha256>.metadata``), checked against the wheel's name and version.

    .venv/bin/python scripts/record_bisect_metadata.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from stacklock.diff import diff_locks
from stacklock.http import make_http_client
from stacklock.index.links import Link
from stacklock.lock import load_lock
from stacklock.metadata.fetch import MetadataFetcher

ROOT = Path(__file__).resolve().parent.parent / "tests" / "data"
LOCKS = (ROOT / "diff" / "pylock.cu128.toml", ROOT / "diff" / "pylock.cu130.toml")
OUT = ROOT / "bisect" / "metadata"


def main() -> None:
    good, bad = (load_lock(p) for p in LOCKS)
    names = [c.name for c in diff_locks(good, bad).packages]
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as cache, make_http_client() as http:
        fetcher = MetadataFetcher(http, cache_dir=Path(cache))
        for lock in (good, bad):
            for name in names:
                pkg = lock.package(name)
                if pkg is None or not pkg.wheels:
                    continue
                wheel = pkg.wheels[0]
                sha = wheel.hashes["sha256"]
                assert wheel.url is not None
                fetcher.get(Link(filename=wheel.filename, url=wheel.url, sha256=sha,
                                 metadata=True))
                shutil.copyfile(Path(cache) / "metadata" / f"{sha}.metadata",
                                OUT / f"{sha}.metadata")
                print(wheel.filename)

if __name__ == "__main__":
    main()
