"""Content-Range and Content-Length as download reads them, crafted included:
int() refuses strings of over 4,300 digits (ValueError), so a header of
thousands of digits was a traceback; now it is a range not understood (the
download starts over)."""

from __future__ import annotations

from stacklock.download import _range_start, _range_total

HUGE = "9" * 5000


def test_real_content_ranges_are_read() -> None:
    assert _range_start("bytes 1000-2047/2048") == 1000
    assert _range_total("bytes 1000-2047/2048") == 2048
    assert _range_total("bytes */4294967296") == 4294967296
    assert _range_start("bytes 0-9/*") == 0 and _range_total("bytes 0-9/*") is None


def test_a_crafted_content_range_is_not_understood_and_raises_nothing() -> None:
    for value in (f"bytes {HUGE}-1/2", f"bytes 0-{HUGE}/2", f"bytes 0-1/{HUGE}",
                  f"bytes */{HUGE}"):
        assert _range_start(value) is None
        assert _range_total(value) is None


def test_a_header_count_is_read_only_when_it_can_be_one() -> None:
    from stacklock.http import header_int

    assert header_int(" 4294967296 ") == 4294967296
    for value in (HUGE, "", "-1", "1e3", "١٢", "12 34"):
        assert header_int(value) is None
