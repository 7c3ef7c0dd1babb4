"""Nightly stand-ins served as a scheduled job sees them: the PyTorch nightly
pages of tests/data/mirror/pytorch/files.toml as of a moment, and every nightly
of torch, torchvision and torchaudio as a wheel with no requirements (derived
here, never stored; torch a module answering validate's probe), so that uv
installs them from loopback and each moves on its own (tests/integration/
test_update.py, test_ci_templates.py)."""

from __future__ import annotations

import zipfile
from http.server import SimpleHTTPRequestHandler
from typing import TYPE_CHECKING

from packaging.utils import parse_wheel_filename

from tests.helpers.pytorch_index import render_pytorch_page
from tests.helpers.standins import StandIn, pytorch_files
from tests.helpers.wheelkit import build_wheel

if TYPE_CHECKING:
    from pathlib import Path

NIGHTLY = ("torch", "torchvision", "torchaudio")


def newest(project: str, as_of: str | None = None) -> str:
    """The newest cp312 x86_64 nightly of ``project`` on the pages then."""
    return str(max(parse_wheel_filename(f.filename)[1] for f in pytorch_files()
                   if f.channel == "nightly/cu130" and f.project == project
                   and "cp312" in f.filename and "x86_64" in f.filename
                   and (as_of is None or f.upload_time <= as_of)))


# what a torch built for CUDA 13.0 answers validate's probe with on a machine
# with no GPU
_CPU_TORCH = ("__version__ = %r\n\nclass version:\n    cuda = \"13.0\"\n\n\n"
              "class cuda:\n    @staticmethod\n    def is_available():\n"
              "        return False\n")


def derive_nightly(folder: Path, host: str, as_of: str) -> None:
    """The nightly pages of NIGHTLY as of ``as_of`` under ``folder/whl/
    nightly/cu130/``, and every nightly as a wheel with no requirements (torch
    a module answering validate's probe) under ``folder/files/`` with its
    METADATA file."""
    files = []
    for f in pytorch_files():
        if f.channel != "nightly/cu130" or f.project not in NIGHTLY or \
                "cp312" not in f.filename:
            continue
        version = str(parse_wheel_filename(f.filename)[1])
        module = (_CPU_TORCH % version).encode() if f.project == "torch" else b""
        built = build_wheel(folder / "files", f.project, version,
                            {f"{f.project}/__init__.py": module},
                            tag=f.filename.split("-", 2)[2].removesuffix(".whl"))
        assert built.name == f.filename
        with zipfile.ZipFile(built) as zf:
            meta = zf.read(f"{f.project}-{version}.dist-info/METADATA")
        (folder / "files" / f"{f.filename}.metadata").write_bytes(meta)
        files.append(StandIn(channel="files", filename=f.filename, metadata=meta,
                             upload_time=f.upload_time, page_sha256=False,
                             wheel=built.read_bytes()))
    for project in NIGHTLY:
        listed = [f for f in files if f.project == project and f.upload_time <= as_of]
        page = render_pytorch_page(project, listed, host).replace(b"/whl/files/",
                                                                  b"/files/")
        target = folder / "whl" / "nightly" / "cu130" / project / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(page)


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def oracle(condition: str) -> list[str]:
    return ["python", "-c", "import importlib.metadata as m, sys\n"
            f"sys.exit({condition})"]
