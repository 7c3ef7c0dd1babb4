"""The shared mechanisms: URL redaction, the retry policy, file digests, RFC 3339."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from stacklock._fs import file_digest
from stacklock.tablereader import parse_rfc3339
from stacklock.urls import redact_text, redact_url, strip_credentials


def test_redact_text_masks_every_url_in_a_message_and_the_echoed_password() -> None:
    url = "https://alice:s3cret@pkgs.example/simple/torch/"
    message = (f"ConnectError: cannot reach {url} (proxy https://tok3n@proxy.example)"
               " auth s3cret refused")
    shown = redact_text(message, url=url)
    assert "s3cret" not in shown and "tok3n" not in shown
    assert redact_url(url) in shown
    assert "https://***@proxy.example" in shown
    assert redact_text("no url here") == "no url here"


def test_strip_credentials_keeps_host_path_and_port() -> None:
    assert strip_credentials("http://u:p@127.0.0.1:8080/simple") == (
        "http://127.0.0.1:8080/simple")


def test_file_digest_matches_hashlib(tmp_path: Path) -> None:
    wheel = (Path(__file__).resolve().parents[1] / "data" / "metadata"
             / "six-1.17.0-py2.py3-none-any.whl" / "0-11049.bin")
    assert file_digest(wheel) == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert file_digest(wheel, "md5") == hashlib.md5(wheel.read_bytes()).hexdigest()


@pytest.mark.parametrize(("text", "iso"), [
    ("2026-02-15T00:00:00Z", "2026-02-15T00:00:00+00:00"),
    ("2025-08-06T18:56:32.456789+02:00", "2025-08-06T18:56:32.456789+02:00"),
    ("2026-02-15", "2026-02-15T00:00:00"),
])
def test_rfc3339_reads_z_offsets_and_dates(text: str, iso: str) -> None:
    parsed = parse_rfc3339(text)
    assert parsed is not None and parsed.isoformat() == iso


def test_rfc3339_refuses_what_is_not_a_time() -> None:
    assert parse_rfc3339("yesterday") is None
