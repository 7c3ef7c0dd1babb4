"""Install hands uv the credentials of a lock's private indexes: the lock is read
for its indexes only when the environment names index credentials at all."""

from __future__ import annotations

from pathlib import Path

from stacklock.install.uvauth import lock_indexes

LOCK = Path(__file__).resolve().parents[2] / "locks" / "pylock.pypi-small.toml"


def test_indexes_are_read_only_when_credentials_are_named() -> None:
    content = LOCK.read_bytes()
    assert lock_indexes(content, environ={"PATH": "/usr/bin"}) == []
    named = lock_indexes(content, environ={"STACKLOCK_INDEX_PYPI_PASSWORD": "t"})
    assert named == [("pypi", "https://pypi.org/simple")]


def test_bytes_that_are_no_toml_give_no_indexes() -> None:
    assert lock_indexes(b"\xff\x00[[[", environ={"STACKLOCK_INDEX_X_USERNAME": "u"}) \
        == []
