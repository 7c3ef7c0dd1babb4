"""Where the recorded data lives, and reading a recorded file."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
REAL = DATA / "real"
SGL_PAGES = REAL / "sgl-project-whl-gh-pages"
FLASHINFER_PAGES = REAL / "flashinfer-ai-whl-gh-pages-2024-03"
PYPI_PAGES = DATA / "pypi"
PYTORCH_PAGES = DATA / "pytorch"


def read_fixture(path: Path) -> bytes:
    """The bytes of a recorded file; ``name`` may be stored as ``name.gz``."""
    if path.is_file():
        return path.read_bytes()
    return gzip.decompress(path.with_name(path.name + ".gz").read_bytes())


def recorded_pypi(request: httpx.Request) -> httpx.Response:
    """A MockTransport handler serving the recorded PyPI JSON pages
    (tests/data/pypi/); 404 for a project not recorded."""
    name = request.url.path.strip("/").split("/")[-1]
    try:
        body = read_fixture(PYPI_PAGES / f"{name}.json")
    except FileNotFoundError:
        return httpx.Response(404)
    return httpx.Response(
        200, headers={"content-type": "application/vnd.pypi.simple.v1+json"},
        content=body)
