"""The wheels uv unpacked into its cache, found by the sha256 uv checked.

``stacklock install`` lets uv download the locked wheels (``--require-hashes``):
uv hashes every download, refuses one that is not the locked sha256, unpacks it
into ``<uv cache>/archive-v0/<id>/`` and writes a pointer next to the wheel's
name under ``wheels-v*/`` (``<version>-<tags>.http`` for an index, ``.rev`` for a
file). The pointer starts with a msgpack value holding ``[id, [{"sha256": hex}],
filename, ...]`` (read from uv 0.13.9's cache, ``wheels-v8``). The archive keeps
the wheel's own ``RECORD`` byte for byte, so validate can still compare the
installed ``RECORD`` with the one inside the wheel that has the locked sha256,
without a second copy of the stack in stacklock's artifact store.

Anything unexpected in a pointer (another layout, a newer uv) means "not found":
the check then reports the wheel as untraceable rather than guessing.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)

from stacklock import runner

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["find_uv_archives", "parse_msgpack_prefix", "uv_cache_dir"]

_POINTER_SUFFIXES = (".http", ".rev")
_HEAD = 4096  # a pointer's msgpack value is a few hundred bytes


def uv_cache_dir() -> Path | None:
    """The cache the bundled uv uses here (``$UV_CACHE_DIR`` or uv's default)."""
    explicit = os.environ.get("UV_CACHE_DIR")
    if explicit:
        return Path(explicit)
    rc, out = runner.SubprocessRunner().capture([runner.find_uv(), "cache", "dir"])
    text = out.strip()
    return Path(text.splitlines()[-1]) if rc == 0 and text else None


class _Truncated(ValueError):
    pass


def _take(data: bytes, pos: int, n: int) -> tuple[bytes, int]:
    if pos + n > len(data):
        raise _Truncated
    return data[pos:pos + n], pos + n


_FIXED = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
          0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
_SIZED = {0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"),
          0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"),
          0xDC: (">H", "array"), 0xDD: (">I", "array"),
          0xDE: (">H", "map"), 0xDF: (">I", "map")}


def _value(data: bytes, pos: int, depth: int = 0) -> tuple[Any, int]:
    """One msgpack value at ``pos`` (no extension types): (value, next pos)."""
    if depth > 16:
        raise ValueError("nested too deep")
    raw, pos = _take(data, pos, 1)
    b = raw[0]
    if b <= 0x7F or b >= 0xE0:
        return (b if b <= 0x7F else b - 0x100), pos
    if b in (0xC0, 0xC2, 0xC3):
        return {0xC0: None, 0xC2: False, 0xC3: True}[b], pos
    if b in _FIXED:
        fmt = _FIXED[b]
        chunk, pos = _take(data, pos, struct.calcsize(fmt))
        return struct.unpack(fmt, chunk)[0], pos
    if 0xA0 <= b <= 0xBF:
        kind, n = "str", b & 0x1F
    elif 0x90 <= b <= 0x9F:
        kind, n = "array", b & 0x0F
    elif 0x80 <= b <= 0x8F:
        kind, n = "map", b & 0x0F
    elif b in _SIZED:
        fmt, kind = _SIZED[b]
        chunk, pos = _take(data, pos, struct.calcsize(fmt))
        n = struct.unpack(fmt, chunk)[0]
    else:
        raise ValueError(f"msgpack type 0x{b:02x} not read here")
    if kind in ("str", "bin"):
        chunk, pos = _take(data, pos, n)
        return (chunk.decode("utf-8") if kind == "str" else chunk), pos
    items = []
    for _ in range(n * (2 if kind == "map" else 1)):
        item, pos = _value(data, pos, depth + 1)
        items.append(item)
    if kind == "array":
        return items, pos
    return {k: v for k, v in zip(items[::2], items[1::2], strict=True)
            if isinstance(k, str)}, pos


def parse_msgpack_prefix(data: bytes) -> Any:
    """The first msgpack value in ``data`` (what follows it is not msgpack)."""
    return _value(data, 0)[0]


def _archives(value: Any) -> Iterable[tuple[str, list[str]]]:
    """Every ``[id, [{"sha256": hex}, ...], ...]`` list inside ``value``."""
    if not isinstance(value, list):
        return
    if (len(value) >= 2 and isinstance(value[0], str)
            and isinstance(value[1], list)
            and all(isinstance(h, dict) for h in value[1])):
        hashes = [str(v).lower() for h in value[1] for k, v in h.items()
                  if k.lower() == "sha256"]
        yield value[0], hashes
    for item in value:
        yield from _archives(item)


def _pointer_key(filename: str) -> tuple[str, str] | None:
    """(project folder, name prefix) of a wheel's pointer: uv files
    ``mdurl-0.1.2-py3-none-any.whl`` under ``.../mdurl/0.1.2-<tags or a hash
    of long tags>``."""
    if not filename.endswith(".whl"):
        return None
    try:
        name, version, *_ = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return canonicalize_name(name), f"{version}-"


def find_uv_archives(cache: Path, wanted: Mapping[str, str]) -> dict[str, Path]:
    """sha256 -> the unpacked wheel in uv's cache, for each wanted
    ``sha256 -> wheel filename`` that uv downloaded and checked against it."""
    keys = {k for f in wanted.values() if (k := _pointer_key(f))}
    found: dict[str, Path] = {}
    try:
        roots = [p for p in cache.iterdir() if p.name.startswith("wheels-v")]
    except OSError:
        return found
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            project = os.path.basename(folder)
            for name in files:
                if (not name.endswith(_POINTER_SUFFIXES)
                        or (project, name.split("-", 1)[0] + "-") not in keys):
                    continue
                for sha, archive in _read_pointer(Path(folder) / name, cache):
                    if sha in wanted:
                        found[sha] = archive
    return found


def _read_pointer(path: Path, cache: Path) -> list[tuple[str, Path]]:
    try:
        with path.open("rb") as fh:
            value = parse_msgpack_prefix(fh.read(_HEAD))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    out = []
    for archive_id, hashes in _archives(value):
        archive = cache / "archive-v0" / archive_id
        if "/" not in archive_id and archive.is_dir():
            out += [(sha, archive) for sha in hashes]
    return out
