"""What newer Pythons took out of the standard library, as a build log shows it.

An old release's ``setup.py`` (or the old setuptools it pins) imports a module
the target Python no longer has: ``No module named 'distutils'`` on 3.12, where
pypa/build only says that the backend "is not available". Such a release does
not build on that Python at all, whatever the build environment holds; the
message should say so, not suggest adding build requirements.

The table is the removals the "What's New" documents list (PEP 594's dead
batteries, PEP 632's distutils), limited to what old build scripts use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Removal", "find_removal"]

# module -> the Python that no longer has it
_MODULES: dict[str, tuple[int, int]] = {
    "formatter": (3, 10), "parser": (3, 10), "symbol": (3, 10),
    "binhex": (3, 11),
    "distutils": (3, 12), "imp": (3, 12), "asynchat": (3, 12),
    "asyncore": (3, 12), "smtpd": (3, 12),
    **dict.fromkeys(
        ("aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "lib2to3",
         "mailcap", "msilib", "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr",
         "spwd", "sunau", "telnetlib", "uu", "xdrlib"), (3, 13)),
}
# (module, attribute) -> the Python that no longer has it
_ATTRIBUTES: dict[tuple[str, str], tuple[int, int]] = {
    **{("collections", n): (3, 10) for n in (
        "Callable", "Container", "Hashable", "Iterable", "Iterator", "Mapping",
        "MutableMapping", "MutableSequence", "MutableSet", "Sequence", "Set",
        "Sized")},
    ("inspect", "getargspec"): (3, 11), ("inspect", "formatargspec"): (3, 11),
    ("asyncio", "coroutine"): (3, 11),
    ("configparser", "SafeConfigParser"): (3, 12),
    ("configparser", "readfp"): (3, 12),
    ("pkgutil", "ImpImporter"): (3, 12), ("pkgutil", "ImpLoader"): (3, 12),
}
_NO_MODULE = re.compile(r"No module named ['\"]([A-Za-z_][\w]*)(?:\.[\w.]*)?['\"]")
_NO_ATTRIBUTE = re.compile(
    r"module ['\"]([\w.]+)['\"] has no attribute ['\"](\w+)['\"]"
    r"|cannot import name ['\"](\w+)['\"] from ['\"]([\w.]+)['\"]")


@dataclass(frozen=True, kw_only=True)
class Removal:
    """``what`` (``distutils``, ``configparser.SafeConfigParser``) left the
    standard library in Python ``removed_in``; ``line`` is the log's line."""

    what: str
    removed_in: str
    line: str


def find_removal(text: str, python: tuple[int, int]) -> Removal | None:
    """The first line of ``text`` (a build log) that fails on something the
    standard library of ``python`` no longer has, or None."""
    for raw in text.splitlines():
        line = raw.strip()
        found = _module(line) or _attribute(line)
        if found is not None and python >= found[1]:
            what, version = found
            return Removal(what=what, removed_in=f"{version[0]}.{version[1]}",
                           line=line[:200])
    return None


def _module(line: str) -> tuple[str, tuple[int, int]] | None:
    m = _NO_MODULE.search(line)
    if m is None or m.group(1) not in _MODULES:
        return None
    return m.group(1), _MODULES[m.group(1)]


def _attribute(line: str) -> tuple[str, tuple[int, int]] | None:
    m = _NO_ATTRIBUTE.search(line)
    if m is None:
        return None
    module, name = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
    version = _ATTRIBUTES.get((module, name))
    return None if version is None else (f"{module}.{name}", version)
