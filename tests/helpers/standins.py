"""Stand-in wheels: small zips labelled as such, served where the real wheels
cannot be fetched from here (download-r2.pytorch.org, github.com release assets).

Each carries a ``STAND-IN.txt``, a METADATA taken from a real one (PyPI's, see
tests/data/mirror/PROVENANCE.md) with its Name and Version set from the file
name, WHEEL and RECORD, so uv installs it like any wheel. The bytes are fixed
(zip timestamps too): the same name always gives the same sha256.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tomllib
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

TESTS = Path(__file__).resolve().parents[1]
PYTORCH_FILES = TESTS / "data" / "mirror" / "pytorch"
SGL_METADATA = TESTS / "data" / "resolve" / "mirror" / "sgl_kernel-0.3.21-pypi.METADATA"
SGL_FILE = "sgl_kernel-0.3.21+cu130-cp312-abi3-manylinux2014_x86_64.whl"
LABEL = b"not the real wheel: a test stand-in\n"
_STAMP = (2026, 1, 1, 0, 0, 0)


def with_name_and_version(metadata: bytes, filename: str,
                          replace: dict[str, str] | None = None) -> bytes:
    """``metadata`` with Name and Version from ``filename`` and each
    ``Requires-Dist: <old>`` line starting with a key of ``replace`` rewritten."""
    name, version, _, _ = parse_wheel_filename(filename)
    display = filename.split("-", 1)[0].replace("_", "-")
    lines = []
    for line in metadata.decode("utf-8").split("\n"):
        if line.startswith("Name: "):
            line = f"Name: {display}"
        elif line.startswith("Version: "):
            line = f"Version: {version}"
        elif line.startswith("Requires-Dist: "):
            value = line[len("Requires-Dist: "):]
            for old, new in (replace or {}).items():
                if value.startswith(old):
                    line = "Requires-Dist: " + new + value[len(old):]
        lines.append(line)
    assert canonicalize_name(display) == name
    return "\n".join(lines).encode("utf-8")


def build_wheel(filename: str, metadata: bytes) -> bytes:
    """A valid wheel named ``filename`` holding nothing but the label."""
    name, version, _, tags = parse_wheel_filename(filename)
    dist_info = f"{filename.split('-', 1)[0]}-{version}.dist-info"
    wheel = "Wheel-Version: 1.0\nGenerator: stacklock-tests\nRoot-Is-Purelib: false\n"
    wheel += "".join(f"Tag: {t}\n" for t in sorted(map(str, tags)))
    members = [(f"{name.replace('-', '_')}_stand_in/STAND-IN.txt", LABEL),
               (f"{dist_info}/METADATA", metadata),
               (f"{dist_info}/WHEEL", wheel.encode())]
    record = "".join(f"{path},sha256={_b64(data)},{len(data)}\n"
                     for path, data in members) + f"{dist_info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in [*members, (f"{dist_info}/RECORD", record.encode())]:
            zf.writestr(zipfile.ZipInfo(path, _STAMP), data)
    return buf.getvalue()


def _b64(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass(frozen=True, kw_only=True)
class StandIn:
    """One file of the PyTorch role: where it lives and what it holds."""

    channel: str  # "cu130" or "nightly/cu130"
    filename: str
    metadata: bytes
    upload_time: str
    page_sha256: bool
    wheel: bytes

    @property
    def project(self) -> str:
        return canonicalize_name(parse_wheel_filename(self.filename)[0])

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.wheel).hexdigest()


@cache
def pytorch_files() -> tuple[StandIn, ...]:
    """tests/data/mirror/pytorch/files.toml, built."""
    table = tomllib.loads((PYTORCH_FILES / "files.toml").read_text("utf-8"))
    out = []
    for entry in table["file"]:
        base = (PYTORCH_FILES / entry["base"]).read_bytes()
        meta = with_name_and_version(base, entry["file"], entry.get("replace"))
        out.append(StandIn(channel=entry["channel"], filename=entry["file"],
                           metadata=meta, upload_time=entry["upload-time"],
                           page_sha256=entry.get("page-sha256", False),
                           wheel=build_wheel(entry["file"], meta)))
    return tuple(out)


@cache
def github_wheel(filename: str) -> bytes | None:
    """The stand-in served at a github.com release asset named ``filename``:
    sgl-kernel's carries PyPI's sgl-kernel 0.3.21 METADATA; flashinfer's JIT
    caches (generic and per-arch) carry a METADATA with no dependencies (their
    real METADATA is not recorded here)."""
    if filename.startswith("sgl_kernel-"):
        meta = with_name_and_version(SGL_METADATA.read_bytes(), filename)
        return build_wheel(filename, meta)
    if re.match(r"flashinfer_jit_cache(_sm\d+[a-z]?)?-", filename):
        meta = with_name_and_version(
            b"Metadata-Version: 2.1\nName: x\nVersion: 0\nRequires-Python: >=3.9\n",
            filename)
        return build_wheel(filename, meta)
    return None


def stand_in_wheel() -> bytes:
    """The stand-in for the sgl-kernel cu130 wheel (``SGL_FILE``)."""
    wheel = github_wheel(SGL_FILE)
    assert wheel is not None
    return wheel
