"""Which pages a cold resolve asks for before the resolver is imported
(stacklock.resolve.early): the profile's direct requirements on the index each
will be read from, never a local or flat index, a URL with credentials, a page
the cache holds fresh (unless --refresh), or anything under --offline or a proxy."""

from __future__ import annotations

import hashlib
import json
import time
from http.server import BaseHTTPRequestHandler

import httpx

from stacklock.index.cache import PageCache
from stacklock.profile import load_profile
from stacklock.resolve.early import MAX_EARLY, early_page_urls, start_early_pages
from tests.helpers.ranges import range_response

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


def test_the_first_metadata_is_read_early_except_under_refresh(tmp_path):
    """The thread that reads each requirement's first METADATA starts with the
    early pages, and not under --refresh (whose resolution takes no page from
    the cache). Without --refresh the index holds its answers until the
    threads were counted."""
    import threading

    from stacklock.httpget import _early
    from tests.helpers.loopback import loopback

    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):
            pass

        def do_GET(self):
            release.wait(30)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    with loopback(Handler) as base:
        release.set()
        for refresh in (True, False):
            if not refresh:  # held, so the thread is still there to be counted
                release.clear()
            before = {t.ident for t in threading.enumerate()}
            urls = start_early_pages(
                str(_profile(tmp_path)), offline=False, refresh=refresh,
                index_urls={"pypi": f"{base}/simple", "pytorch": f"{base}/whl"},
                cache_dir=tmp_path / f"cache-{refresh}")
            assert f"{base}/simple/sgl-kernel/" in urls
            walkers = [t for t in threading.enumerate() if t.ident not in before
                       and t.name == "stacklock-early-walk"]
            assert len(walkers) == (0 if refresh else 1)
            release.set()
            for walker in walkers:
                walker.join(timeout=30)
                assert not walker.is_alive()
            # the answers nobody took: the next round asks (and is held) anew
            _early.clear()


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


class _Index:
    """A loopback PEP 691 index of wheels built here, answering range reads as
    a file host does, and counting every request by (path, Range)."""

    def __init__(self, folder, wheels):
        self.files = {w.name: w.read_bytes() for w in wheels}
        self.seen: list[tuple[str, str | None]] = []

    def page(self, base, project):
        files = [{"filename": name, "url": f"{base}/files/{name}",
                  "hashes": {"sha256": hashlib.sha256(data).hexdigest()}}
                 for name, data in sorted(self.files.items())
                 if name.startswith(project.replace("-", "_") + "-")]
        return json.dumps({"meta": {"api-version": "1.0"}, "name": project,
                           "files": files}).encode()

    def handler(self, base_of):
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):
                pass

            def do_GET(self):
                index.seen.append((self.path, self.headers.get("Range")))
                if self.path.startswith("/simple/"):
                    project = self.path.strip("/").split("/")[-1]
                    status, headers, body = 200, [(
                        "Content-Type", "application/vnd.pypi.simple.v1+json")], \
                        index.page(base_of(), project)
                else:
                    data = index.files.get(self.path.rsplit("/", 1)[-1])
                    if data is None:
                        status, headers, body = 404, [], b""
                    else:
                        answer = range_response(httpx.Request(
                            "GET", "http://host/", headers={
                                "range": self.headers.get("Range") or ""}), data)
                        status, body = answer.status_code, answer.content
                        headers = [(k, v) for k, v in answer.headers.items()
                                   if k.lower() != "content-length"]
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


WALK_PROFILE = """
[profile]
description = "early metadata"
[target]
python = "3.12"
[requirements]
packages = ["demo>=1", "pinned<2", "marked; python_version < '3'", "steered"]
overrides = ["steered==1.0"]
[[index]]
name = "pypi"
url = "{base}/simple"
"""


def test_the_first_metadata_is_read_into_the_cache_and_not_asked_again(tmp_path):
    """The newest allowed version's METADATA of each plain requirement lands in
    the cache from the early page; the resolution then asks for neither the
    page nor the METADATA again. A requirement with a marker or an override is
    left to the resolver."""
    from stacklock.http import ssl_context
    from stacklock.httpget import _early, fetch_early
    from stacklock.index.client import ACCEPT
    from stacklock.resolve.early import read_first_metadata
    from stacklock.resolve.locking import lock_profile
    from tests.helpers.loopback import loopback
    from tests.helpers.wheelkit import build_wheel

    folder = tmp_path / "wheels"
    wheels = [build_wheel(folder, name, version, {f"{name}/__init__.py": b""})
              for name, version in (("demo", "1.0"), ("demo", "2.0"),
                                    ("pinned", "1.5"), ("pinned", "2.0"),
                                    ("marked", "1.0"), ("steered", "1.0"),
                                    ("steered", "3.0"))]
    index = _Index(folder, wheels)
    box: list[str] = []
    with loopback(index.handler(lambda: box[0])) as base:
        box.append(base)
        profile_path = tmp_path / "walk.toml"
        profile_path.write_text(WALK_PROFILE.format(base=base))
        cache = tmp_path / "cache"
        profile = load_profile(str(profile_path))
        urls = early_page_urls(profile, cache_dir=cache, refresh=False)
        assert urls == [f"{base}/simple/{n}/"
                        for n in ("demo", "pinned", "marked", "steered")]
        # what start_early_pages does, the second step waited for here
        fetch_early(urls, {"Accept": ACCEPT}, context=ssl_context,
                    user_agent="test", timeout={"connect": 5, "read": 5,
                                                "write": 5, "pool": 5})
        read = read_first_metadata(profile, urls, cache_dir=cache)
        assert sorted(read) == ["demo-2.0-py3-none-any.whl",
                                "pinned-1.5-py3-none-any.whl"]
        early = sorted(index.seen)
        assert [p for p, _ in early].count("/simple/demo/") == 1
        assert ("/files/demo-1.0-py3-none-any.whl", "bytes=-65536") not in early
        assert all("marked" not in p and "steered" not in p
                   for p, r in early if r is not None)
        _early.clear()  # marked and steered: the resolution asks for itself
        index.seen.clear()
        lock_profile(str(profile_path), output=tmp_path / "lock.toml",
                     cache_dir=cache, check=False)
    again = [p for p, _ in index.seen]
    assert "/simple/demo/" not in again and "/simple/pinned/" not in again
    assert not any(p.startswith(("/files/demo-2.0", "/files/pinned-1.5"))
                   for p in again)
    assert "/simple/steered/" in again  # asked by the resolution itself


def test_two_clients_asking_at_once_read_a_page_and_a_metadata_once(tmp_path):
    """The early reads have a client and a METADATA fetcher of their own; when
    the resolution's ask for the same page or wheel meanwhile, they wait for
    the one read in flight and take it from the cache."""
    import threading

    from stacklock.http import make_http_client
    from stacklock.index.client import IndexClient
    from stacklock.index.pages import link_of
    from stacklock.metadata import MetadataFetcher
    from stacklock.profile import IndexSpec
    from tests.helpers.loopback import loopback
    from tests.helpers.wheelkit import build_wheel

    wheel = build_wheel(tmp_path / "wheels", "demo", "2.0", {"demo/x.py": b"1\n" * 9})
    index = _Index(tmp_path / "wheels", [wheel])
    box: list[str] = []
    with loopback(index.handler(lambda: box[0])) as base:
        box.append(base)
        spec = IndexSpec(name="pypi", url=f"{base}/simple")
        cache = tmp_path / "cache"
        start = threading.Barrier(4)
        found: list[object] = []

        def read(_: int) -> None:
            with make_http_client() as http:
                client = IndexClient(http, cache_dir=cache)
                start.wait()
                rows = client.get_rows(spec, "demo")
                found.append(rows.filenames())
                fetcher = MetadataFetcher(http, cache_dir=cache)
                start.wait()
                found.append(fetcher.get(link_of(rows.row(0))).version)

        threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [p for p, _ in index.seen].count("/simple/demo/") == 1
    tails = [r for p, r in index.seen if p.startswith("/files/")]
    assert tails and len(tails) == len(set(tails))  # each range read once
    assert found.count(["demo-2.0-py3-none-any.whl"]) == 4
    assert [str(v) for v in found if not isinstance(v, list)] == ["2.0"] * 4
