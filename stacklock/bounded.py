"""Bounded reading: the one place stacklock opens an input file and calls ``json``
or ``tomllib``.

Every format stacklock reads (a lock, a profile, a pack manifest, an index page, a
facts entry, bisect's resume log, ``direct_url.json``, uv's and a probe's JSON
output, its own caches) is parsed here, so one set of bounds holds for all of them:

- a file is opened only if it is a regular file (a FIFO would block) and read only
  up to its format's size (:func:`read_regular`);
- nesting deeper than :data:`MAX_DEPTH` is refused before the parser sees it:
  CPython's ``json`` and ``tomllib`` stop deep nesting only with ``RecursionError``,
  and ``tomllib`` takes memory quadratic in the length of a dotted key
  (``a.a.a...`` of 10,000 parts: 400 MB);
- JSON's ``Infinity`` and ``NaN`` (and numbers too large for a float) are refused:
  they are not JSON, and ``int(inf)`` raises ``OverflowError``;
- whatever the parser raises becomes one :class:`Malformed`, a ``ValueError`` whose
  message is one line (where it is known, the line or key path).

Each format's reader (``load_lock``, ``load_profile``, ``read_manifest``,
``rows_from_json``, ...) turns :class:`Malformed` into that format's error, naming the
file. ``tests/unit/test_bounded.py`` fails on a ``json``/``tomllib``/``tomlkit`` parse
anywhere else in the package.

Standard library only: every pack carries this module.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tomllib
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_SHOWN",
    "Malformed",
    "NotRegular",
    "check_json_nesting",
    "open_regular",
    "parse_json",
    "parse_json_at",
    "parse_toml",
    "read_regular",
    "shorten",
    "shown",
]

# nesting levels: the deepest format stacklock reads (a lock) needs 6
MAX_DEPTH = 64
# characters of a value an error message shows (the head, then the length)
MAX_SHOWN = 120


class Malformed(ValueError):
    """An input that is not of its format, or over a bound; the message is one line
    without the file's name (the format's reader adds it). ``bound`` is True when
    the input was refused for a bound (size, depth, a number that is not finite),
    not for its syntax: no write cut short by an interruption does that."""

    def __init__(self, message: str, *, bound: bool = False) -> None:
        super().__init__(message)
        self.bound = bound


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: what an error
    message shows of a value (a 20,000-clause specifier is not a message)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """``repr(value)``, shortened (:func:`shorten`)."""
    try:
        text = repr(value)
    except RecursionError:  # not from these readers: they bound the depth
        text = f"<{type(value).__name__} nested too deeply to show>"
    return shorten(text, limit)


def _size(limit: int) -> str:
    if limit >= 1 << 20 and not limit % (1 << 20):
        return f"{limit >> 20} MiB"
    if limit >= 1 << 10 and not limit % (1 << 10):
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"


class NotRegular(OSError):
    """A path that is not a regular file (a FIFO, a folder, a device)."""


def open_regular(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open` that refuses anything but a regular file,
    opening without blocking first (a FIFO with no writer would wait forever)."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory"
                    if stat.S_ISDIR(mode) else "a device or socket")
            raise NotRegular(kind)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], *, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.
    Raises Malformed for a FIFO, a folder or a device (opened without blocking,
    then refused) and for a file larger than ``limit``; OSError (FileNotFoundError
    ...) as ``open`` does."""
    try:
        with open(path, "rb", opener=open_regular) as fh:
            content = fh.read(limit + 1)
    except NotRegular as exc:
        raise Malformed(f"not a regular file ({exc})", bound=True) from None
    if len(content) > limit:
        raise Malformed(f"larger than {_size(limit)}", bound=True)
    return content


# -- JSON -----------------------------------------------------------------------

# every byte but the ones that nest or quote; braces counted as brackets (which
# closes which is the parser's to check: the depth is the same)
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")


def _json_depth(content: bytes, limit: int) -> bool | None:
    """Whether ``content``'s brackets nest at most ``limit`` deep (outside strings).
    Byte operations only (8 ms for an 11 MB page, which ``json`` decodes in 57):
    drop escaped backslashes and quotes, keep the bytes that nest or quote, drop
    strings (removing an empty ``""`` never changes which side of a quote the rest
    is on), then remove innermost pairs once per level. None for brackets that do
    not pair up (the parser then names the error)."""
    if b"\\" in content:
        content = content.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = content.translate(_AS_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in kept:
        kept = b"".join(kept.split(b'"')[0::2])
    return _nests_within(kept, limit)


def _nests_within(brackets: bytes, limit: int) -> bool | None:
    """Whether ``brackets`` (``[`` and ``]`` only) nest at most ``limit`` deep:
    each pass removes the innermost pairs, one level; None when they do not pair
    up (a pass removes nothing)."""
    for _ in range(limit):
        if not brackets:
            return True
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return None
        brackets = shorter
    if not brackets:
        return True
    return False if b"[]" in brackets else None


def check_json_nesting(content: bytes, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise Malformed when ``content``'s JSON nests deeper than ``max_depth``
    (brackets that do not pair up pass: the parser names those), for a document
    decoded piece by piece (a large index page) rather than by :func:`parse_json`."""
    kept = _json_depth(content, max_depth)
    if kept is False:
        raise Malformed(f"nested deeper than {max_depth} levels", bound=True)


def _no_constant(name: str) -> Any:
    raise Malformed(f"{name} is not a JSON value", bound=True)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Malformed(f"{shorten(text)} is not a finite number", bound=True)
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def parse_json(content: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``content`` (UTF-8 bytes or text), within the bounds;
    everything else is :class:`Malformed`."""
    if isinstance(content, str):
        text = content
        raw = content.encode("utf-8", "surrogatepass")
    else:
        raw = content
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Malformed(f"not valid JSON: not UTF-8 (byte {exc.start})") from None
    if (_json_depth(raw, max_depth) is True
            or text.count("[") + text.count("{") <= max_depth):
        return _decode(text, max_depth)
    _decode(text, max_depth)  # too deep, or brackets that do not pair: which?
    raise Malformed(f"nested deeper than {max_depth} levels", bound=True)


def _decode(text: str, max_depth: int) -> Any:
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise Malformed(f"nested deeper than {max_depth} levels", bound=True) from None
    except Malformed:
        raise
    except (ValueError, OverflowError) as exc:
        raise Malformed(_json_message(exc)) from None


def _json_message(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
    return f"not valid JSON: {shorten(str(exc))}"


def parse_json_at(text: str, start: int, *, max_depth: int = MAX_DEPTH
                  ) -> tuple[Any, int]:
    """The JSON value that starts at ``text[start]`` and where it ends (one entry
    of a large page, decoded alone), within the bounds."""
    try:
        value, end = _DECODER.raw_decode(text, start)
    except RecursionError:
        raise Malformed(f"line {_line_of(text, start)}: {_TOO_DEEP}",
                        bound=True) from None
    except Malformed:
        raise
    except (ValueError, OverflowError) as exc:
        raise Malformed(_json_message(exc)) from None
    if not _shallow(value, max_depth):
        raise Malformed(f"line {_line_of(text, start)}: {_TOO_DEEP}", bound=True)
    return value, end


def _shallow(value: Any, limit: int) -> bool:
    """Whether a parsed value nests at most ``limit`` deep (iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            children = item.values()
        elif kind is list:
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children
                     if type(child) is dict or type(child) is list)
    return True


# -- TOML -----------------------------------------------------------------------

# strings (four kinds) and comments, which may hold brackets and dots
_TOML_TEXT = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*+"""|' r"'''(?:[^']|'(?!''))*+'''|"
    r'"(?:[^"\\\n]|\\.)*+"|' r"'[^'\n]*+'|#[^\n]*+", re.S)
# a key of MAX_DEPTH or more dotted parts (strings stand as "s")
_LONG_KEY = re.compile(r"(?:\.[ \t]*+[\w-]++[ \t]*+){%d}" % (MAX_DEPTH - 1))
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")


def parse_toml(content: bytes | str, *, max_depth: int = MAX_DEPTH
               ) -> dict[str, Any]:
    """The TOML document in ``content`` (UTF-8 bytes or text), within the bounds;
    everything else is :class:`Malformed`. Brackets and dotted keys are counted
    before ``tomllib`` parses (neither is bounded there), the parsed tables'
    depth after (dotted keys nest tables too)."""
    if isinstance(content, bytes):
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Malformed(f"not valid TOML: not UTF-8 (byte {exc.start})") from None
    else:
        text = content
    _check_toml_nesting(text, max_depth)
    try:
        data = tomllib.loads(text, parse_float=_finite)
    except RecursionError:
        raise Malformed(f"nested deeper than {max_depth} levels", bound=True) from None
    except Malformed:
        raise
    except tomllib.TOMLDecodeError as exc:
        raise Malformed(f"not valid TOML: {shorten(str(exc).strip())}") from None
    except (ValueError, OverflowError) as exc:
        raise Malformed(f"not valid TOML: {shorten(str(exc))}") from None
    if not _shallow(data, max_depth):
        raise Malformed(f"nested deeper than {max_depth} levels", bound=True)
    return data


def _check_toml_nesting(text: str, limit: int) -> None:
    """Raise Malformed for a dotted key of more than MAX_DEPTH parts or brackets
    nested deeper than ``limit``. Counted on the text as it is first (0.5 ms for a
    130 kB lock); only when that finds one are strings and comments, which may hold
    dots and brackets, taken out and the count made again (1.5 ms more)."""
    if _LONG_KEY.search(text) is None and _toml_brackets(text, limit):
        return
    bare = _TOML_TEXT.sub("s", text)
    long_key = _LONG_KEY.search(bare)
    if long_key is not None:
        raise Malformed(f"line {_line_of(bare, long_key.start())}: a dotted key of "
                        f"more than {MAX_DEPTH} parts", bound=True)
    if not _toml_brackets(bare, limit):
        raise Malformed(f"nested deeper than {limit} levels", bound=True)


def _toml_brackets(bare: str, limit: int) -> bool:
    """Whether the brackets of ``bare`` (TOML without strings and comments) nest
    at most ``limit`` deep. Brackets that do not pair up pass (tomllib names the
    error; a RecursionError is caught and the parsed tables are measured)."""
    kept = bare.encode("utf-8", "surrogatepass").translate(_AS_BRACKETS,
                                                           _NOT_BRACKET)
    return _nests_within(kept, limit) is not False
