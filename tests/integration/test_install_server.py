"""The loopback file server the install tests use cuts, resumes and serves ranges
like the CUDA CDN does."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.install_server import Served


def test_server_resumes_a_cut_response(server: tuple[str, Served]) -> None:
    """The server cuts once and then serves the rest to a Range request."""
    base, served = server
    served.files["/f"] = bytes(range(256)) * 100
    served.cut_after["/f"] = 1000
    with httpx.Client() as http:
        with http.stream("GET", f"{base}/f") as response:
            got = b""
            with pytest.raises(httpx.HTTPError):
                for chunk in response.iter_bytes():
                    got += chunk
        assert 0 < len(got) <= 1000
        rest = http.get(f"{base}/f", headers={"Range": f"bytes={len(got)}-"})
    assert rest.status_code == 206
    assert got + rest.content == served.files["/f"]
    assert served.requests[-1] == ("/f", f"bytes={len(got)}-")
