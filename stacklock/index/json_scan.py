"""A large PEP 691 page read without decoding all of it.

A resolution looks at the few files of a page that can fit the target (one in
ten, often fewer), so decoding every entry of a 5 MB page is mostly wasted:
:func:`scan_files` finds each file name and where it sits with one regular
expression, and :class:`ScannedFiles` decodes an entry (with ``json``) only when
it is asked for. This relies on JSON itself, not on how an index lays its JSON
out: a ``"`` inside a string is always escaped, so ``"filename": "..."`` only ever
matches a key; the object that holds a file name is the last ``{`` before it that
follows a ``[`` or a ``,`` (an array element, not a value). Every decoded entry
must carry the file name it was found by; a page where that fails, or whose names
hold escapes, is decoded whole.
"""

from __future__ import annotations

import re
from typing import Any

from stacklock.bounded import Malformed, parse_json, parse_json_at

__all__ = ["MIN_SCAN", "ScannedFiles", "scan_files"]

MIN_SCAN = 64 * 1024  # smaller pages decode whole in well under a millisecond
_FILES = re.compile(r'"files"\s*:\s*\[')
_NAME = re.compile(r'"filename"\s*:\s*"([^"\\]*)"')
# how PyPI (and Python's json.dumps) spell the key: found by plain string search,
# a third faster than the pattern (10 against 16 ms on a 6.9 MB page)
_KEY = '"filename": "'
_SPACE = " \t\r\n"
_UNREADABLE = "an entry that is not valid JSON"


class ScannedFiles:
    """The ``"files"`` of a page, each entry decoded on first use. ``names`` are
    the file names in page order. Iterating decodes the page whole (once)."""

    def __init__(self, text: str, positions: list[int], names: list[str]) -> None:
        self._text = text
        self._positions = positions  # where each "filename" key is
        self.names = names
        self._whole: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.names)

    @property
    def decoded_whole(self) -> bool:
        """Whether the page had to be decoded whole (iterated, or an entry not
        found where the scan put it)."""
        return self._whole is not None

    def __getitem__(self, index: int) -> Any:
        if self._whole is not None:
            return self._whole[index]
        start = self._start(index)
        if start is not None:
            try:
                entry, _end = parse_json_at(self._text, start)
            except Malformed:
                entry = None
            if type(entry) is dict and entry.get("filename") == self.names[index]:
                return entry
        return list(self)[index]  # not laid out as expected: decode it whole

    def _start(self, index: int) -> int | None:
        """Where the entry holding file name ``index`` opens: the last ``{``
        before the name that follows a ``[`` or a ``,`` (whitespace between)."""
        text, low = self._text, self._positions[index - 1] if index else 0
        at = text.rfind("{", low, self._positions[index])
        while at >= 0:
            before = at - 1
            while before >= 0 and text[before] in _SPACE:
                before -= 1
            if before >= 0 and text[before] in "[,":
                return at
            at = text.rfind("{", low, at)
        return None

    def __iter__(self) -> Any:
        if self._whole is None:
            try:
                files = parse_json(self._text).get("files")
            except (Malformed, AttributeError):
                files = None
            if not isinstance(files, list) or len(files) != len(self.names):
                files = [_UNREADABLE] * len(self.names)
            self._whole = files
        return iter(self._whole)


def scan_files(content: bytes) -> ScannedFiles | None:
    """The entries of a large PEP 691 page, not decoded yet; None for a small
    page or one whose file names cannot all be read this way (decode it whole)."""
    if len(content) < MIN_SCAN:
        return None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head = _FILES.search(text)
    if head is None:
        return None
    total = text.count('"filename"', head.end())
    found = _find_names(text, head.end())
    if found is None or len(found[0]) != total:  # spelt otherwise: the pattern
        matches = list(_NAME.finditer(text, head.end()))
        found = [m.start() for m in matches], [m[1] for m in matches]
    if not found[0] or len(found[0]) != total:
        return None  # a name with an escape, or a key spelt another way
    return ScannedFiles(text, *found)


def _find_names(text: str, start: int) -> tuple[list[int], list[str]] | None:
    """Where each ``"filename": "`` key is and the name it holds; None when a
    name holds an escape (the pattern refuses those too)."""
    positions: list[int] = []
    names: list[str] = []
    find = text.find
    at = find(_KEY, start)
    while at >= 0:
        first = at + len(_KEY)
        end = find('"', first)
        name = text[first:end]
        if end < 0 or "\\" in name:
            return None
        positions.append(at)
        names.append(name)
        at = find(_KEY, end + 1)
    return positions, names
