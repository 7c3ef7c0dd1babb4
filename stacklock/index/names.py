"""The projects an index lists, and which of them are close to a name it does
not have: what "did you mean" offers for a mistyped requirement.

An index's root page lists every project (PEP 503 anchors; PEP 691's
``projects``), a flat page or a folder its files. PyPI's root is large (about
40 MB of HTML for some 700,000 names), so it is read only on the way to the
error, with a regular expression rather than an HTML parser, and matched after
a cheap length filter."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from stacklock.bounded import Malformed, parse_json

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["close_names", "parse_project_names"]

_ANCHOR = re.compile(rb"<a\s[^>]*>\s*([^<]+?)\s*</a>", re.I)
_CUTOFF = 0.8  # difflib's similarity: one or two letters off in a short name


def parse_project_names(content: bytes, content_type: str) -> list[str]:
    """The names an index root lists: a PEP 691 JSON root's ``projects``, else
    the anchors of a PEP 503 HTML root. A body that is neither: none."""
    if "json" in content_type:
        try:
            data = parse_json(content)
        except Malformed:
            return []
        projects = data.get("projects") if isinstance(data, dict) else None
        if not isinstance(projects, list):
            return []
        return [p["name"] for p in projects
                if isinstance(p, dict) and isinstance(p.get("name"), str)]
    return [m.decode("utf-8", "replace") for m in _ANCHOR.findall(content)]


def close_names(name: str, names: Iterable[str], *, most: int = 3) -> list[str]:
    """The names in ``names`` closest to ``name`` (not ``name`` itself), best
    first, as the index spells them."""
    wanted = canonicalize_name(name)
    near: dict[str, str] = {}
    for found in names:
        if abs(len(found) - len(wanted)) <= 2:
            canonical = canonicalize_name(found)
            if canonical != wanted:
                near.setdefault(canonical, found)
    best = difflib.get_close_matches(wanted, near, n=most, cutoff=_CUTOFF)
    return [near[b] for b in best]
