"""A lock never records a credential: a profile whose private index URL carries
``alice:s3cret@`` and a direct reference with the same, resolved against a
loopback index that answers only with those credentials (real wheels). The
lock names the index, its wheels and the direct reference without them, and
nothing stacklock keeps on disk (caches, replay record) holds the password."""

from __future__ import annotations

import base64
import hashlib
import tomllib
from pathlib import Path

import pytest

from stacklock.cli import main
from tests.helpers.data import DATA
from tests.helpers.install_server import Served

WHEELS = DATA / "install" / "wheels"
SIX = "six-1.17.0-py2.py3-none-any.whl"
IDNA = "idna-3.20-py3-none-any.whl"


def _serve_private(served: Served) -> None:
    """A PEP 503 page for six (its wheel by an absolute path on the same host)
    and both wheels, each asked with alice's credentials or refused."""
    for name in (SIX, IDNA):
        served.files[f"/files/{name}"] = (WHEELS / name).read_bytes()
    sha = hashlib.sha256(served.files[f"/files/{SIX}"]).hexdigest()
    served.files["/simple/six/"] = (
        f'<a href="/files/{SIX}#sha256={sha}">{SIX}</a>\n').encode()
    served.authorization = "Basic " + base64.b64encode(b"alice:s3cret").decode()


def test_no_credential_reaches_the_lock_or_the_caches(
        server: tuple[str, Served], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    base, served = server
    _serve_private(served)
    secret = base.replace("http://", "http://alice:s3cret@")
    profile = tmp_path / "private.toml"
    profile.write_text(
        f'[[index]]\nname = "corp"\nurl = "{secret}/simple"\n'
        f'[requirements]\npackages = ["six", "idna @ {secret}/files/{IDNA}"]\n')
    cache = tmp_path / "cache"
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(cache))
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    out = tmp_path / "pylock.private.toml"
    code = main(["resolve", str(profile), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert not served.unauthorized  # every request carried the credentials
    text = out.read_text("utf-8")
    assert "s3cret" not in text and "alice" not in text
    lock = tomllib.loads(text)
    [index] = lock["tool"]["stacklock"]["indexes"]
    assert index == {"name": "corp", "url": f"{base}/simple"}
    packages = {p["name"]: p for p in lock["packages"]}
    assert packages["six"]["wheels"][0]["url"] == f"{base}/files/{SIX}"
    assert packages["idna"]["archive"]["url"] == f"{base}/files/{IDNA}"
    kept = [p for p in cache.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]
    assert kept == []
