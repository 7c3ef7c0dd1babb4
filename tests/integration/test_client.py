"""IndexClient: negotiation, faults (respx), cache, credentials, local indexes,
the loopback server, a recorded cassette, and one live read of PyPI."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import httpx
import pytest
import respx

from stacklock.errors import IndexUnreadable
from stacklock.http import Credentials, Retry, make_http_client
from stacklock.index.client import ACCEPT, IndexClient
from stacklock.profile import IndexSpec
from tests.helpers.cassette import CassetteMiss, ReplayTransport
from tests.helpers.data import FLASHINFER_PAGES, PYPI_PAGES, SGL_PAGES, read_fixture

PYPI = IndexSpec(name="pypi", url="https://pypi.org/simple")
SECRET = IndexSpec(name="private", url="https://alice:s3cret@pkgs.example/simple")
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PACKAGING_JSON = read_fixture(PYPI_PAGES / "packaging.json")
PACKAGING_HTML = read_fixture(PYPI_PAGES / "packaging.html")
N_PACKAGING = len(json.loads(PACKAGING_JSON)["files"])


def _json_ok() -> httpx.Response:
    return httpx.Response(200, headers={"content-type": JSON_TYPE},
                          content=PACKAGING_JSON)


def _cache_files(client: IndexClient) -> list[Path]:
    assert client.cache_dir is not None
    return sorted(client.cache_dir.rglob("*.page")) if client.cache_dir.exists() \
        else []


@pytest.fixture
def router():
    return respx.Router(assert_all_called=False)


def test_negotiates_json_first(router, make_client):
    route = router.get("https://pypi.org/simple/packaging/").mock(
        return_value=_json_ok())
    client = make_client(router.handler)
    links = client.get_links(PYPI, "Packaging")
    assert len(links) == N_PACKAGING
    accept = route.calls.last.request.headers["accept"]
    assert accept == ACCEPT and accept.startswith(JSON_TYPE)


def test_html_fallback_gives_the_same_links(router, make_client):
    router.get("https://pypi.org/simple/packaging/").mock(return_value=httpx.Response(
        200, headers={"content-type": "text/html"}, content=PACKAGING_HTML))
    html_links = make_client(router.handler, cache_dir=None).get_links(
        PYPI, "packaging")
    router.get("https://pypi.org/simple/packaging/").mock(return_value=_json_ok())
    json_links = make_client(router.handler, cache_dir=None).get_links(
        PYPI, "packaging")
    assert sorted(li.url for li in html_links) == sorted(li.url for li in json_links)


@pytest.mark.parametrize("first", [
    httpx.ReadTimeout("slow"), httpx.ConnectError("reset"),
    httpx.Response(503), httpx.Response(502),
])
def test_transient_failure_then_200_is_retried(router, make_client, first):
    route = router.get("https://pypi.org/simple/packaging/").mock(
        side_effect=[first, _json_ok()])
    client = make_client(router.handler)
    assert len(client.get_links(PYPI, "packaging")) == N_PACKAGING
    assert route.call_count == 2
    assert client.slept == [client.retry.backoff]
    assert len(_cache_files(client)) == 1


def test_truncated_body_is_retried_and_never_cached(router, make_client):
    cut = httpx.Response(200, headers={"content-type": JSON_TYPE,
                                       "content-length": str(len(PACKAGING_JSON))},
                         content=PACKAGING_JSON[:1000])
    route = router.get("https://pypi.org/simple/packaging/").mock(return_value=cut)
    client = make_client(router.handler)
    with pytest.raises(IndexUnreadable) as info:
        client.get_links(PYPI, "packaging")
    assert route.call_count == client.retry.attempts == 3
    assert f"truncated body: 1000 of {len(PACKAGING_JSON)} bytes" in str(info.value)
    assert _cache_files(client) == []


def test_timeouts_exhaust_the_attempts_with_one_line_error(router, make_client):
    router.get("https://alice:s3cret@pkgs.example/simple/torch/").mock(
        side_effect=httpx.ConnectTimeout("timed out"))
    client = make_client(router.handler)
    with pytest.raises(IndexUnreadable) as info:
        client.get_links(SECRET, "torch")
    text = str(info.value)
    assert "\n" not in text and "s3cret" not in text
    assert "index 'private' (https://alice:***@pkgs.example/simple/torch/)" in text
    assert "--index NAME=URL" in text and "--offline" in text
    assert info.value.index == "private"
    assert client.slept == [0.5, 1.0]  # backoff doubles
    assert _cache_files(client) == []


def test_unreachable_error_never_echoes_the_password(router, make_client):
    def boom(request):
        raise httpx.ConnectError(f"cannot connect to {request.url}")

    client = make_client(boom)
    with pytest.raises(IndexUnreadable) as info:
        client.get_links(SECRET, "torch")
    assert "s3cret" not in str(info.value)
    assert "ConnectError" in str(info.value)


def test_total_timeout_stops_retrying(router, make_client):
    route = router.get("https://pypi.org/simple/torch/").mock(
        return_value=httpx.Response(503))
    now = [0.0]

    def clock():
        now[0] += 10.0
        return now[0]

    client = make_client(router.handler,
                         retry=Retry(total=15.0, attempts=5, clock=clock))
    with pytest.raises(IndexUnreadable, match="gave up within the 15 s allowed"):
        client.get_links(PYPI, "torch")
    assert route.call_count < 5


def test_attempts_end_within_the_request_deadline(router, make_client,
                                                  monkeypatch):
    """An index that never answers: the attempts and the waits between them
    stop at the request deadline (--timeout sets STACKLOCK_HTTP_TIMEOUT), the
    error is the network's (exit 3), and the index's other pages fail at once."""
    monkeypatch.setenv("STACKLOCK_HTTP_TIMEOUT", "5")
    route = router.get(url__startswith="https://pypi.org/simple/").mock(
        side_effect=httpx.ReadTimeout("no answer"))
    now = [0.0]

    def clock():
        now[0] += 2.0  # each look at the clock: one more silent attempt
        return now[0]

    client = make_client(router.handler, retry=Retry(attempts=5, clock=clock))
    with pytest.raises(IndexUnreadable,
                       match="gave up within the 5 s allowed") as info:
        client.get_links(PYPI, "torch")
    assert route.call_count < 5
    assert info.value.network and info.value.exit_code == 3
    asked = route.call_count
    with pytest.raises(IndexUnreadable) as again:
        client.get_links(PYPI, "numpy")
    assert again.value is info.value and route.call_count == asked


@pytest.mark.parametrize(("answer", "network"), [
    (httpx.ConnectError("refused"), True), (httpx.Response(503), True),
    (httpx.Response(401), False), (httpx.Response(403), False),
    (httpx.Response(200, headers={"content-type": "image/png"}, content=b"x"),
     False),
])
def test_exit_3_is_the_networks_alone(router, make_client, answer, network):
    router.get("https://pypi.org/simple/torch/").mock(side_effect=lambda _r: (
        (_ for _ in ()).throw(answer) if isinstance(answer, Exception) else answer))
    client = make_client(router.handler)
    with pytest.raises(IndexUnreadable) as info:
        client.get_links(PYPI, "torch")
    assert (info.value.network, info.value.exit_code) == (
        network, 3 if network else 2)


def test_find_unreachable_names_each_dead_index_once(router, make_client):
    router.get(url__startswith="https://dead.example/").mock(
        side_effect=httpx.ConnectError("refused"))
    router.get(url__startswith="https://pypi.org/").mock(return_value=_json_ok())
    dead = [IndexSpec(name=f"dead-{i}", url=f"https://dead.example/{i}")
            for i in (1, 2)]
    client = make_client(router.handler)
    found = client.find_unreachable([(dead[0], "torch"), (PYPI, "packaging"),
                                     (dead[1], "six"), (dead[0], "numpy")])
    assert [e.index for e in found] == ["dead-1", "dead-2"]


def test_404_means_not_on_this_index(router, make_client):
    router.get("https://pypi.org/simple/no-such-thing/").mock(
        return_value=httpx.Response(404))
    client = make_client(router.handler)
    assert client.get_links(PYPI, "no_such.thing") == []
    assert _cache_files(client) == []


@pytest.mark.parametrize(("ctype", "body", "why"), [
    ("text/plain", b"Service temporarily in maintenance", "not an index page"),
    ("application/octet-stream", b"<p>login here</p>", "not an index page"),
    (JSON_TYPE, b'{"projects": [{"name": "torch"}]}', "'files'"),
    ("application/json", b"{not json", "not valid JSON"),
])
def test_a_page_that_is_not_an_index(router, make_client, ctype, body, why):
    router.get("https://pypi.org/simple/torch/").mock(return_value=httpx.Response(
        200, headers={"content-type": ctype}, content=body))
    client = make_client(router.handler)
    with pytest.raises(IndexUnreadable) as info:
        client.get_links(PYPI, "torch")
    assert why in str(info.value)
    assert "https://pypi.org/simple/torch/" in str(info.value)
    assert _cache_files(client) == []


def test_401_hints_at_credentials(router, make_client):
    router.get("https://alice:s3cret@pkgs.example/simple/torch/").mock(
        return_value=httpx.Response(401))
    with pytest.raises(IndexUnreadable, match="credentials"):
        make_client(router.handler).get_links(SECRET, "torch")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_credentials_from_url_and_netrc_are_sent(router, make_client, tmp_path):
    seen = []

    def handler(request):
        seen.append(request.headers.get("authorization"))
        return _json_ok()

    make_client(handler).get_links(SECRET, "packaging")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine pkgs.example login bob password hunter2\n")
    netrc.chmod(0o600)
    plain = IndexSpec(name="private", url="https://pkgs.example/simple")
    make_client(handler, auth=Credentials(netrc_file=netrc),
                cache_dir=None).get_links(plain, "pkg")
    assert seen == [_basic("alice", "s3cret"), _basic("bob", "hunter2")]


def test_cache_serves_a_second_client_and_offline(router, make_client, tmp_path):
    router.get("https://pypi.org/simple/packaging/").mock(return_value=_json_ok())
    first = make_client(router.handler).get_links(PYPI, "packaging")

    def no_network(request):
        raise AssertionError("must not touch the network")

    assert make_client(no_network).get_links(PYPI, "packaging") == first
    assert make_client(no_network, offline=True).get_links(PYPI, "packaging") == first
    with pytest.raises(IndexUnreadable, match="not in the cache and --offline"):
        make_client(no_network, offline=True).get_links(PYPI, "torch")


def test_refresh_revalidates_with_etag(router, make_client):
    route = router.get("https://pypi.org/simple/packaging/")
    route.mock(return_value=httpx.Response(
        200, headers={"content-type": JSON_TYPE, "etag": '"v1"'},
        content=PACKAGING_JSON))
    first = make_client(router.handler).get_links(PYPI, "packaging")
    route.mock(return_value=httpx.Response(304))
    again = make_client(router.handler, refresh=True).get_links(PYPI, "packaging")
    assert again == first
    assert route.calls.last.request.headers["if-none-match"] == '"v1"'


def test_redirects_are_followed_and_relative_hrefs_resolve_there(router,
                                                                  make_client):
    raw = (SGL_PAGES / "cu130/sgl-kernel/index.html").read_bytes()
    page = raw.replace(b"https://github.com/sgl-project/whl/releases/download/", b"")
    router.get("https://docs.sglang.ai/whl/cu130/sgl-kernel/").mock(
        return_value=httpx.Response(301, headers={
            "location": "https://docs.sglang.io/whl/cu130/sgl-kernel/"}))
    router.get("https://docs.sglang.io/whl/cu130/sgl-kernel/").mock(
        return_value=httpx.Response(200, headers={"content-type": "text/html"},
                                    content=page))
    index = IndexSpec(name="sgl", url="https://docs.sglang.ai/whl/cu130")
    links = make_client(router.handler).get_links(index, "sgl-kernel")
    assert len(links) == 50
    assert links[0].url.startswith("https://docs.sglang.io/whl/cu130/sgl-kernel/v0.")
    again = make_client(router.handler, offline=True).get_links(index, "sgl-kernel")
    assert [li.url for li in again] == [li.url for li in links]


def test_prefetch_fetches_each_page_once_and_keeps_errors(router, make_client):
    names = [f"proj{i}" for i in range(12)]
    for name in names:
        router.get(f"https://pypi.org/simple/{name}/").mock(return_value=_json_ok())
    router.get("https://pypi.org/simple/broken/").mock(
        return_value=httpx.Response(500))
    client = make_client(router.handler, cache_dir=None)
    client.prefetch([(PYPI, n) for n in [*names, *names, "broken"]])
    sent = client.requests
    assert sent == len(names) + client.retry.attempts
    assert all(len(client.get_links(PYPI, n)) == N_PACKAGING for n in names)
    with pytest.raises(IndexUnreadable, match="HTTP 500"):
        client.get_links(PYPI, "broken")
    assert client.requests == sent  # everything came from memory


def test_flat_page_over_http_is_fetched_once_and_filtered(router, make_client):
    raw = (FLASHINFER_PAGES / "cu121/flashinfer/index.html").read_bytes()
    route = router.get("https://flashinfer.ai/whl/cu121/flashinfer/").mock(
        return_value=httpx.Response(200, headers={"content-type": "text/html"},
                                    content=raw))
    flat = IndexSpec(name="fi", url="https://flashinfer.ai/whl/cu121/flashinfer/",
                     kind="flat")
    client = make_client(router.handler)
    assert len(client.get_links(flat, "flashinfer")) == raw.count(b"<a ")
    assert client.get_links(flat, "torch") == []
    assert route.call_count == 1


@pytest.mark.parametrize("style", ["path", "file-url"])
def test_local_simple_index_folder(make_client, style):
    root = SGL_PAGES / "cu130"
    url = str(root) if style == "path" else root.as_uri()
    index = IndexSpec(name="local", url=url)
    client = make_client(lambda r: pytest.fail("no HTTP for a local index"))
    page = client.get_page(index, "SGL_Kernel")
    assert len(page.links) == 50
    assert client.get_links(index, "not-there") == []


def test_local_find_links_folder_hashes_files(make_client, tmp_path):
    names = [li.filename for li in make_client(lambda r: None).get_links(
        IndexSpec(name="s", url=str(SGL_PAGES / "cu130")), "sgl-kernel")][:3]
    for i, name in enumerate(dict.fromkeys(names)):
        (tmp_path / name).write_bytes(b"wheel %d" % i)
    (tmp_path / "notes.txt").write_text("not a wheel")
    links = make_client(lambda r: None).get_links(
        IndexSpec(name="w", url=tmp_path.as_uri(), kind="flat"), "sgl-kernel")
    assert sorted(li.filename for li in links) == sorted(set(names))
    import hashlib
    for link in links:
        body = (tmp_path / link.filename).read_bytes()
        assert link.sha256 == hashlib.sha256(body).hexdigest()
        assert link.size == len(body) and link.url.startswith("file://")


def test_missing_local_folder_is_an_error(make_client, tmp_path):
    with pytest.raises(IndexUnreadable, match="does not exist"):
        make_client(lambda r: None).get_links(
            IndexSpec(name="gone", url=str(tmp_path / "gone")), "torch")


def test_loopback_server_over_real_http(local_index, tmp_path):
    index = IndexSpec(name="sgl", url=f"{local_index}/real/sgl-project-whl-gh-pages"
                                      "/cu130")
    with make_http_client() as http:
        client = IndexClient(http, cache_dir=tmp_path)
        links = client.get_links(index, "sgl-kernel")
        assert len(links) == 50
        assert client.get_links(index, "not-there") == []
    assert len(list((tmp_path / "pages").rglob("*.page"))) == 1


def test_replayed_cassette_of_real_pypi_traffic(tmp_path):
    root = PYPI_PAGES / "cassette-client"
    transport = ReplayTransport(root)
    with httpx.Client(transport=transport) as http:
        client = IndexClient(http, cache_dir=tmp_path)
        links = client.get_links(PYPI, "packaging")
        assert len(links) == N_PACKAGING
        assert client.get_links(PYPI, "stacklock-no-such-project-fixture") == []
        wheel = next(li for li in reversed(links) if li.is_wheel)
        head = http.head(wheel.url)
        size = int(head.headers["content-length"])
        assert size == wheel.size and head.content == b""
        tail = http.get(wheel.url, headers={"Range": f"bytes={size - 4096}-"})
        assert tail.status_code == 206 and len(tail.content) == 4096
        assert tail.content[-22:-18] == b"PK\x05\x06"  # zip end of central dir
        with pytest.raises(CassetteMiss):
            http.get(wheel.url, headers={"Range": "bytes=0-10"})
    copied = tmp_path / "c"
    shutil.copytree(root, copied)
    assert ReplayTransport(copied).entries == transport.entries


@pytest.mark.live
def test_live_pypi_torch_has_a_cp312_manylinux_wheel(tmp_path):
    from stacklock.index.finder import Finder
    from stacklock.target import Target

    with make_http_client() as http:
        client = IndexClient(http, cache_dir=tmp_path)
        finder = Finder(client, [PYPI], Target(python="3.12"))
        best = finder.find_candidates("torch")[0]
    assert best.link.filename.endswith(".whl")
    assert "cp312-cp312-manylinux" in best.link.filename
    assert best.link.sha256 is not None and best.link.url.startswith("https://")


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _page(headers: dict[str, str]) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": JSON_TYPE, **headers},
                          content=PACKAGING_JSON)


def test_a_fresh_page_is_not_asked_for_again_a_stale_one_is(router, make_client):
    """max-age from the response (PyPI: 600 s), counted from the fetch; past it
    the page is revalidated with its ETag, and a 304 makes it fresh again."""
    route = router.get("https://pypi.org/simple/packaging/")
    route.mock(return_value=_page({"etag": '"v1"', "cache-control":
                                   "max-age=600, public"}))
    clock = _Clock()
    first = make_client(router.handler, clock=clock).get_links(PYPI, "packaging")
    clock.now += 599
    client = make_client(router.handler, clock=clock)
    assert client.is_local(PYPI, "packaging")
    assert client.get_links(PYPI, "packaging") == first
    assert route.call_count == 1
    clock.now += 2
    route.mock(return_value=httpx.Response(304))
    stale = make_client(router.handler, clock=clock)
    assert not stale.is_local(PYPI, "packaging")
    assert stale.get_links(PYPI, "packaging") == first
    assert route.call_count == 2
    assert route.calls.last.request.headers["if-none-match"] == '"v1"'
    clock.now += 599  # the 304 started a new 600 s
    assert make_client(router.handler, clock=clock).get_links(PYPI, "packaging") \
        == first
    assert route.call_count == 2
    # --offline reads a stale page without asking
    clock.now += 3600
    assert make_client(router.handler, clock=clock, offline=True).get_links(
        PYPI, "packaging") == first
    assert route.call_count == 2


@pytest.mark.parametrize(("headers", "fresh_for"), [
    ({}, 600.0),  # nothing said: PyPI's 600 s, RFC 9111's heuristic freshness
    ({"cache-control": "max-age=60", "age": "20"}, 40.0),
    ({"cache-control": "no-cache"}, 0.0),
    ({"cache-control": "max-age=0"}, 0.0),
])
def test_freshness_comes_from_the_response(router, make_client, headers, fresh_for):
    route = router.get("https://pypi.org/simple/packaging/").mock(
        return_value=_page(headers))
    clock = _Clock()
    first = make_client(router.handler, clock=clock).get_links(PYPI, "packaging")
    clock.now += max(fresh_for - 1, 0)
    again = make_client(router.handler, clock=clock).get_links(PYPI, "packaging")
    assert again == first
    assert route.call_count == (1 if fresh_for else 2)


def test_a_stale_page_with_the_same_body_is_not_parsed_again(router, make_client,
                                                             monkeypatch):
    """No ETag (a plain mirror): the stale page comes again in full; its rows
    are found by the body's sha256, so nothing is parsed."""
    from stacklock.index import client as client_module

    route = router.get("https://pypi.org/simple/packaging/").mock(
        return_value=_page({}))
    clock = _Clock()
    first = make_client(router.handler, clock=clock).get_links(PYPI, "packaging")
    clock.now += 601

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(client_module, "rows_from_json", no_parse)
    assert make_client(router.handler, clock=clock).get_links(PYPI, "packaging") \
        == first
    assert route.call_count == 2
