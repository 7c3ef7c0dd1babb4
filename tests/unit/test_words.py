"""Counts and cut-short lists in English, as every message prints them."""

from __future__ import annotations

from stacklock.words import counted, first, plural


def test_counts_are_english() -> None:
    assert [counted(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert counted(3, "library", "libraries") == "3 libraries"
    assert plural(1, "patch", "patches") == "patch"


def test_a_list_is_cut_short_with_how_many_more() -> None:
    names = ["a", "b", "c", "d", "e"]
    assert first(names, 3) == "a, b, c and 2 more"
    assert first(names, 4) == "a, b, c, d and 1 more"
    assert first(names, 5) == first(names, 9) == "a, b, c, d, e"
    assert first(names, 2, sep="; ") == "a; b and 3 more"
    assert first([], 3) == ""
