"""Record the real sdists and build log that
tests/integration/test_sdist_metadata.py reads.

Downloads, from real PyPI, a few small sdists chosen for their layout (PKG-INFO
first or last in the tar, a zip sdist, trusted or untrusted PKG-INFO), checks
each against the sha256 PyPI's simple index states, and writes them with a
PROVENANCE.md into tests/data/sdist/. flash-attn's sdist (8.4 MB) is not kept:
only its PKG-INFO, read from its first 64 KiB, and the log of a real metadata
build that fails for lack of torch (``--flash-attn-log PATH`` copies one that
``stacklock resolve`` left under <cache>/logs/). Nor is scipy's (30 MB): only
its PKG-INFO and pyproject.toml members.

    .venv/bin/python scripts/record_sdists.py [--flash-attn-log PATH]
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import httpx

from stacklock.metadata.sdist_archive import (
    read_remote_pkg_info,
    read_remote_sdist_files,
)

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "sdist"
FILES = {
    "python-nvd3": "python-nvd3-0.16.0.tar.gz",  # setuptools, PKG-INFO 2.1 first
    "requests": "requests-2.32.3.tar.gz",  # 131 KB, PKG-INFO within the first 28 KB
    "tomli": "tomli-2.5.0.tar.gz",  # flit, PKG-INFO 2.4 last
    "wincertstore": "wincertstore-0.2.1.zip",  # a zip sdist
    # dbt-core 1.12.6's sdist-only dependency: PKG-INFO 2.1, static pyproject.toml
    "dbt-core-experimental-parser": "dbt_core_experimental_parser-2.0.8.tar.gz",
}
SCIPY = "scipy-1.18.1.tar.gz"  # meson-python: PKG-INFO 2.1, static pyproject.toml
FLASH_ATTN = "flash_attn-2.8.3.tar.gz"
JSON = {"Accept": "application/vnd.pypi.simple.v1+json"}


def _file(http: httpx.Client, project: str, filename: str) -> dict[str, object]:
    page = http.get(f"https://pypi.org/simple/{project}/", headers=JSON)
    page.raise_for_status()
    return next(f for f in page.json()["files"] if f["filename"] == filename)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flash-attn-log", type=Path)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    with httpx.Client(timeout=60, follow_redirects=True) as http:
        for project, filename in FILES.items():
            entry = _file(http, project, filename)
            body = http.get(str(entry["url"])).content
            sha = hashlib.sha256(body).hexdigest()
            assert sha == entry["hashes"]["sha256"], filename  # type: ignore[index]
            (OUT / filename).write_bytes(body)
            rows.append(f"| `{filename}` | {entry['url']} | {sha} |")
        entry = _file(http, "flash-attn", FLASH_ATTN)
        raw = read_remote_pkg_info(http, str(entry["url"]), FLASH_ATTN,
                                   on_bytes=lambda n: None)
        assert raw is not None
        (OUT / "flash_attn-2.8.3.PKG-INFO").write_bytes(raw)
        rows.append(f"| `flash_attn-2.8.3.PKG-INFO` | the `flash_attn-2.8.3/PKG-INFO` "
                    f"member of {entry['url']} | (a member) |")
        entry = _file(http, "scipy", SCIPY)
        members = read_remote_sdist_files(
            http, str(entry["url"]), SCIPY, on_bytes=lambda n: None,
            enough=lambda found: len(found) == 2)
        for base, raw in sorted(members.items()):
            (OUT / f"scipy-1.18.1.{base}").write_bytes(raw)
            rows.append(f"| `scipy-1.18.1.{base}` | the `scipy-1.18.1/{base}` "
                        f"member of {entry['url']} | (a member) |")
    if args.flash_attn_log:
        # the checkout's own path is this machine's business, not the fixture's
        root = str(Path(__file__).resolve().parent.parent)
        text = args.flash_attn_log.read_text("utf-8").replace(root, "<repo>")
        (OUT / "build-flash_attn-2.8.3.log").write_text(text, "utf-8")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
