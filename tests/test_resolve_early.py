"""Which pages a cold resolve asks for before the resolver is imported
(stacklock.resolve.early): the profile's direct requirements on the index each
will be read from, never a local or flat index, a URL with credentials, a page
the cache holds fresh (unless --refresh), or anything under --offline or a proxy."""

from __future__ import annotations

import time

from stacklock.index.cache import PageCache
from stacklock.profile import load_profile
from stacklock.resolve.early import MAX_EARLY, early_page_urls, start_early_pages

PROFILE = """
[profile]
description = "early pages"
[target]
python = "3.12"
[requirements]
packages = ["torch>=2.9", "Flash_Attn", "sgl-kernel", "local-thing"]
[[index]]
name = "pypi"
[[index]]
name = "pytorch"
url = "https://download.pytorch.org/whl/cu130"
packages = ["torch"]
[[index]]
name = "local"
url = "{local}"
packages = ["local-thing"]
"""


def _profile(tmp_path, text=PROFILE):
    path = tmp_path / "early.toml"
    path.write_text(text.format(local=tmp_path / "wheels"))
    return path


def test_the_direct_requirements_on_their_index(tmp_path):
    profile = load_profile(str(_profile(tmp_path)))
    urls = early_page_urls(profile, cache_dir=tmp_path / "cache", refresh=False)
    assert urls == ["https://download.pytorch.org/whl/cu130/torch/",
                    "https://pypi.org/simple/flash-attn/",
                    "https://pypi.org/simple/sgl-kernel/"]


def test_a_fresh_cached_page_is_not_asked_unless_refresh(tmp_path):
    profile = load_profile(str(_profile(tmp_path)))
    cache = tmp_path / "cache"
    url = "https://pypi.org/simple/sgl-kernel/"
    PageCache(cache / "pages").write_page(url, url, b"{}", {
        "content-type": "application/vnd.pypi.simple.v1+json",
        "fresh-until": time.time() + 600})
    assert url not in early_page_urls(profile, cache_dir=cache, refresh=False)
    assert url in early_page_urls(profile, cache_dir=cache, refresh=True)
    later = time.time() + 3600  # stale by then: asked again
    assert url in early_page_urls(profile, cache_dir=cache, refresh=False, now=later)


def test_credentials_and_many_requirements(tmp_path):
    text = PROFILE.replace('url = "https://download.pytorch.org/whl/cu130"',
                           'url = "https://u:p@download.pytorch.org/whl/cu130"')
    names = ", ".join(f'"p{i}"' for i in range(20))
    text = text.replace('packages = ["torch>=2.9", "Flash_Attn", "sgl-kernel", '
                        '"local-thing"]', f'packages = ["torch", {names}]')
    profile = load_profile(str(_profile(tmp_path, text)))
    urls = early_page_urls(profile, cache_dir=tmp_path / "cache", refresh=False)
    assert len(urls) == MAX_EARLY and not any("@" in u for u in urls)
    assert urls[0] == "https://pypi.org/simple/p0/"


def test_nothing_under_offline_a_proxy_or_a_broken_profile(tmp_path, monkeypatch):
    path = str(_profile(tmp_path))
    assert start_early_pages(path, index_urls={}, offline=True, refresh=False,
                             cache_dir=tmp_path / "cache") == []
    assert start_early_pages(str(tmp_path / "missing.toml"), index_urls={},
                             offline=False, refresh=False,
                             cache_dir=tmp_path / "cache") == []
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert start_early_pages(path, index_urls={}, offline=False, refresh=False,
                             cache_dir=tmp_path / "cache") == []


def test_the_pages_are_sent_to_the_index_the_resolution_uses(tmp_path):
    from http.server import BaseHTTPRequestHandler

    from stacklock.httpget import _early
    from tests.helpers.loopback import loopback

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):
            pass

        def do_GET(self):
            seen.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    with loopback(Handler) as base:
        urls = start_early_pages(
            str(_profile(tmp_path)), offline=False, refresh=False,
            index_urls={"pypi": f"{base}/simple", "pytorch": f"{base}/whl/cu130"},
            cache_dir=tmp_path / "cache")
        assert urls == [f"{base}/whl/cu130/torch/", f"{base}/simple/flash-attn/",
                        f"{base}/simple/sgl-kernel/"]
        deadline = time.monotonic() + 5
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(seen) == ["/simple/flash-attn/", "/simple/sgl-kernel/",
                                "/whl/cu130/torch/"]
    _early.clear()  # answers nobody takes here: none left for other tests
