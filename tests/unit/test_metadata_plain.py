"""The METADATA header reader (``_plain_fields``) against packaging's email parser,
on every real METADATA file under tests/data and on variants of them that the
header reader must hand over to packaging (CR line ends, folded or non-ASCII
wanted fields, repeated single fields)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.metadata import Metadata
from packaging.utils import canonicalize_name

from stacklock.errors import MetadataError
from stacklock.metadata.parse import _plain_fields, parse_wheel_metadata

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted(
    {*DATA.rglob("*METADATA*"), *DATA.rglob("*.metadata")} - set(DATA.rglob("*.md"))
)


def _filename(raw: bytes) -> str:
    meta = Metadata.from_email(raw, validate=False)
    name = canonicalize_name(meta.name).replace("-", "_")
    return f"{name}-{meta.version}-py3-none-any.whl"


def _reference(raw: bytes) -> tuple[object, ...]:
    """What packaging's own parser makes of the fields the resolver reads."""
    meta = Metadata.from_email(raw, validate=False)
    return (canonicalize_name(meta.name), meta.version,
            [str(r) for r in meta.requires_dist or ()], meta.requires_python,
            list(meta.provides_extra or ()))


def _ours(raw: bytes, filename: str | None = None) -> tuple[object, ...]:
    meta = parse_wheel_metadata(raw, filename or _filename(raw))
    return (meta.name, meta.version, [str(r) for r in meta.requires_dist],
            meta.requires_python, list(meta.provides_extra))


def test_real_files_are_found() -> None:
    assert len([p for p in REAL if p.is_file()]) >= 6


@pytest.mark.parametrize("path", [p for p in REAL if p.is_file()],
                         ids=lambda p: str(p.relative_to(DATA)))
def test_real_metadata_reads_as_packaging_reads_it(path: Path) -> None:
    raw = path.read_bytes()
    fields = _plain_fields(raw)
    assert fields is not None  # the real files take the fast path
    raw_meta = Metadata.from_email(raw, validate=False)
    assert fields.get("requires-dist", []) == list(
        raw_meta._raw.get("requires_dist", []))  # the strings, as the file has them
    assert _ours(raw) == _reference(raw)


def _torch() -> bytes:
    return (DATA / "cuda" / "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl.METADATA"
            ).read_bytes()


@pytest.mark.parametrize("variant", [
    "crlf", "folded-requirement", "non-ascii-requirement", "repeated-name",
    "non-ascii-author", "folded-license",
])
def test_variants_agree_with_packaging(variant: str) -> None:
    raw = _torch()
    filename = _filename(raw)
    head, _, body = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    req = next(i for i, line in enumerate(lines) if line.startswith(b"Requires-Dist:"))
    if variant == "crlf":
        raw = raw.replace(b"\n", b"\r\n")
    elif variant == "folded-requirement":
        lines[req] = lines[req] + b"\n  ; python_version >= '3'"
    elif variant == "non-ascii-requirement":
        lines[req] = lines[req] + " ; platform_release == 'é'".encode()
    elif variant == "repeated-name":
        lines.insert(1, b"Name: torch")
    elif variant == "non-ascii-author":
        lines.insert(3, "Author: Jürgen Ørsted".encode())
    else:
        lines.insert(3, b"License: BSD\n        Copyright (c) Meta")
    if variant != "crlf":
        raw = b"\n".join(lines) + b"\n\n" + body
    fast = variant in ("non-ascii-author", "folded-license")
    assert (_plain_fields(raw) is not None) == fast
    try:
        expected = _reference(raw)
    except ValueError as exc:  # packaging rejects it: so must we
        with pytest.raises(MetadataError):
            _ours(raw, filename)
        assert variant in ("repeated-name", "folded-requirement"), exc
        return
    assert _ours(raw, filename) == expected
