"""The TLS context of stacklock.http: built once per CA setting and process, on a
thread that prepare_tls() starts early, and shared by the clients made after it;
an unreadable setting is one line, and is read again once it is mended."""

from __future__ import annotations

import shutil
import ssl
from pathlib import Path

import certifi
import pytest

from stacklock.errors import StacklockError
from stacklock.http import make_http_client, prepare_tls


def _context_of(client: object) -> ssl.SSLContext:
    pool = client._transport._pool  # type: ignore[attr-defined]
    context = pool._ssl_context
    assert isinstance(context, ssl.SSLContext)
    return context


def test_prepared_context_is_the_one_every_client_gets(tmp_path: Path,
                                                        monkeypatch) -> None:
    bundle = tmp_path / "bundle.pem"
    shutil.copyfile(certifi.where(), bundle)  # a setting no other test uses
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    prepare_tls()
    with make_http_client() as first, make_http_client() as second:
        assert _context_of(first) is _context_of(second)
        assert _context_of(first).cert_store_stats()["x509_ca"] > 50


def test_another_setting_gets_its_own_context(tmp_path: Path, monkeypatch) -> None:
    one, two = tmp_path / "one.pem", tmp_path / "two.pem"
    shutil.copyfile(certifi.where(), one)
    end = "-----END CERTIFICATE-----"
    first_ca = Path(certifi.where()).read_text().split(end)[0] + end + "\n"
    two.write_text(first_ca)
    monkeypatch.setenv("SSL_CERT_FILE", str(one))
    with make_http_client() as client:
        many = _context_of(client)
    monkeypatch.setenv("SSL_CERT_FILE", str(two))
    with make_http_client() as client:
        single = _context_of(client)
    assert single is not many
    assert single.cert_store_stats()["x509_ca"] == 1
    assert many.cert_store_stats()["x509_ca"] > 50


def test_an_unreadable_setting_is_said_and_read_again_when_mended(
        tmp_path: Path, monkeypatch) -> None:
    bundle = tmp_path / "later.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    prepare_tls()  # fails on its thread: told when a client is made
    with pytest.raises(StacklockError, match=f"SSL_CERT_FILE={bundle}: no CA"):
        make_http_client()
    with pytest.raises(StacklockError, match="no CA certificates could be read"):
        make_http_client()
    shutil.copyfile(certifi.where(), bundle)
    with make_http_client() as client:
        assert _context_of(client).cert_store_stats()["x509_ca"] > 50
