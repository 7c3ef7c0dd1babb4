"""ArtifactStore: content addressing, the URL index, resume, hash checks."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from stacklock import download as download_module
from stacklock import store as store_module
from stacklock.errors import DownloadError, HashMismatchError
from stacklock.http import Retry
from stacklock.store import ArtifactStore
from tests.helpers.ranges import range_response

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

SIX = (Path(__file__).resolve().parents[1] / "data" / "metadata"
       / "six-1.17.0-py2.py3-none-any.whl")
URL = "https://files.example.org/packages/six-1.17.0-py2.py3-none-any.whl"


def _store(root: Path) -> ArtifactStore:
    """A store whose retries do not wait."""
    return ArtifactStore(root, retry=Retry(attempts=4, sleep=lambda _s: None))


@pytest.fixture
def payload() -> bytes:
    """A real wheel (six, recorded whole from PyPI) as the file to download."""
    return (SIX / "0-11049.bin").read_bytes()


class CutStream(httpx.SyncByteStream):
    """A body that delivers ``data`` and then loses the connection."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self.data
        raise httpx.ReadError("connection reset by peer")


def client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler))


def test_fetch_stores_by_sha256_and_never_downloads_twice(
    tmp_path: Path, payload: bytes
) -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, content=payload)

    store = _store(tmp_path)
    sha = hashlib.sha256(payload).hexdigest()
    with client(handler) as http:
        path, got = store.fetch(http, URL, size=len(payload))
        assert got == sha
        assert path == tmp_path / "sha256" / sha[:2] / sha
        assert path.read_bytes() == payload
        assert store.path_for(sha) == path and store.has(sha)
        # The same URL again, and another URL whose sha256 is already here.
        assert store.fetch(http, URL) == (path, sha)
        mirror = "https://mirror.example.org/six.whl"
        assert store.fetch(http, mirror, expected_sha256=sha.upper()) == (path, sha)
    assert len(requests) == 1
    # A new store object on the same root (the next run) knows both URLs.
    assert _store(tmp_path).sha256_for_url(mirror) == sha
    assert list((tmp_path / "tmp").glob("*.part")) == []


def test_resume_after_a_cut_connection(tmp_path: Path, payload: bytes) -> None:
    half = len(payload) // 2
    ranges: list[str | None] = []
    served = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal served
        ranges.append(request.headers.get("range"))
        if len(ranges) == 1:
            served += half
            headers = {"content-length": str(len(payload))}
            return httpx.Response(
                200, headers=headers, stream=CutStream(payload[:half])
            )
        response = range_response(request, payload)
        served += len(response.content)
        return response

    progress: list[tuple[int, int | None]] = []
    store = _store(tmp_path)
    with client(handler) as http:
        path, _sha = store.fetch(
            http,
            URL,
            expected_sha256=hashlib.sha256(payload).hexdigest(),
            progress=lambda done, total: progress.append((done, total)),
        )
    assert path.read_bytes() == payload
    assert ranges == [None, f"bytes={half}-"]
    assert served == len(payload)  # nothing was downloaded twice
    assert progress[-1] == (len(payload), len(payload))
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)


def test_resume_across_runs_from_the_partial_file(
    tmp_path: Path, payload: bytes
) -> None:
    third = len(payload) // 3
    first_run = 0

    def failing(request: httpx.Request) -> httpx.Response:
        nonlocal first_run
        first_run += 1
        if first_run == 1:
            return httpx.Response(200, stream=CutStream(payload[:third]))
        raise httpx.ConnectError("network is unreachable", request=request)

    store = _store(tmp_path)
    with client(failing) as http, pytest.raises(DownloadError) as caught:
        store.fetch(http, URL, size=len(payload))
    assert "partial file is kept" in str(caught.value)
    assert [p.stat().st_size for p in (tmp_path / "tmp").glob("*.part")] == [third]

    ranges: list[str | None] = []

    def good(request: httpx.Request) -> httpx.Response:
        ranges.append(request.headers.get("range"))
        return range_response(request, payload)

    with client(good) as http:
        path, _sha = _store(tmp_path).fetch(http, URL, size=len(payload))
    assert ranges == [f"bytes={third}-"]
    assert path.read_bytes() == payload


def test_server_that_ignores_range_restarts_cleanly(
    tmp_path: Path, payload: bytes
) -> None:
    part_dir = tmp_path / "tmp"
    part_dir.mkdir()
    key = store_module._url_key(URL)
    (part_dir / f"{key}.part").write_bytes(payload[:100])

    with client(lambda request: httpx.Response(200, content=payload)) as http:
        path, sha = _store(tmp_path).fetch(http, URL)
    assert path.read_bytes() == payload
    assert sha == hashlib.sha256(payload).hexdigest()


def test_hash_mismatch_removes_the_file_and_raises(
    tmp_path: Path, payload: bytes
) -> None:
    wrong = "0" * 64
    secret_url = "https://user:s3cret@files.example.org/six.whl"
    with (
        client(lambda request: httpx.Response(200, content=payload)) as http,
        pytest.raises(HashMismatchError) as caught,
    ):
        _store(tmp_path).fetch(http, secret_url, expected_sha256=wrong)
    assert caught.value.expected == wrong
    assert caught.value.actual == hashlib.sha256(payload).hexdigest()
    assert "s3cret" not in str(caught.value)
    assert list(tmp_path.rglob("*.part")) == []
    assert not (tmp_path / "sha256").exists()


def test_credentials_never_reach_the_url_index(tmp_path: Path, payload: bytes) -> None:
    with client(lambda request: httpx.Response(200, content=payload)) as http:
        _store(tmp_path).fetch(
            http, "https://tok:s3cret@files.example.org/a.whl"
        )
    written = b"".join(
        p.read_bytes() for p in (tmp_path / "urls").rglob("*") if p.is_file()
    )
    assert b"files.example.org/a.whl" in written
    assert b"s3cret" not in written


def test_http_error_names_the_redacted_url(tmp_path: Path) -> None:
    with (
        client(lambda request: httpx.Response(404)) as http,
        pytest.raises(DownloadError) as caught,
    ):
        _store(tmp_path).fetch(http, "https://u:pw@files.example.org/x.whl")
    assert "HTTP 404" in str(caught.value)
    assert caught.value.url == "https://u:***@files.example.org/x.whl"


def test_path_for_rejects_what_is_not_a_sha256(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.path_for("../../etc/passwd") is None
    assert not store.has("ab" * 32)


def test_racing_fetches_of_one_url_download_once(
    tmp_path: Path, payload: bytes
) -> None:
    requests = 0
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal requests
        with lock:
            requests += 1
        return httpx.Response(200, content=payload)

    def one(_i: int) -> tuple[Path, str]:
        # A store object per worker, as separate processes would have.
        with client(handler) as http:
            return _store(tmp_path).fetch(http, URL)

    with ThreadPoolExecutor(4) as pool:
        results = set(pool.map(one, range(8)))
    assert len(results) == 1 and requests == 1


def test_a_corrupted_blob_is_dropped_and_fetched_again(
    tmp_path: Path, payload: bytes
) -> None:
    """A flipped byte in the store (a bad disk, a stray write): the next hand-out
    re-hashes the changed file, drops it and its seal, and the next fetch
    downloads again; a flipped blob with no seal (a copied store) goes too."""
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, content=payload)

    sha = hashlib.sha256(payload).hexdigest()
    store = _store(tmp_path / "artifacts")
    with client(handler) as http:
        path, _ = store.fetch(http, URL, expected_sha256=sha)
        assert store.path_for(sha) == path  # sealed: no re-hash needed
        blob = bytearray(path.read_bytes())
        blob[100] ^= 0xFF
        path.write_bytes(bytes(blob))
        assert store.path_for(sha) is None
        assert not path.exists() and not path.with_name(f"{sha}.ok").exists()
        again, got = store.fetch(http, URL, expected_sha256=sha)
    assert got == sha and again.read_bytes() == payload
    assert len(requests) == 2
    path.with_name(f"{sha}.ok").unlink()
    path.write_bytes(bytes(blob))
    assert store.path_for(sha) is None and not path.exists()


def test_a_download_of_no_known_size_stops_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download_module, "MAX_DOWNLOAD", 1000)

    def endless(request: httpx.Request) -> httpx.Response:  # no Content-Length
        return httpx.Response(200, content=iter([bytes(600)] * 10))

    with client(endless) as http, \
            pytest.raises(DownloadError, match="more than the 1000 bytes"):
        _store(tmp_path / "artifacts").fetch(http, URL)


def test_an_intact_file_whose_seal_is_stale_is_hashed_again_and_kept(
    tmp_path: Path, payload: bytes
) -> None:
    """Touched (a copy, a restore from backup): its stat no longer matches the
    seal, its bytes still hash right: handed out, sealed again, not fetched."""
    import os

    sha = hashlib.sha256(payload).hexdigest()
    store = _store(tmp_path)
    with client(lambda r: httpx.Response(200, content=payload)) as http:
        path, _ = store.fetch(http, URL, expected_sha256=sha)
    seal = path.with_name(f"{sha}.ok")
    before = seal.read_text()
    os.utime(path, ns=(1, 1))
    assert store.path_for(sha) == path and path.read_bytes() == payload
    assert seal.read_text() != before  # sealed again, for the stat it has now


def test_the_bytes_a_store_fetched_are_the_bytes_received(
    tmp_path: Path, payload: bytes
) -> None:
    """What install reports stacklock fetched: a whole file, then (another
    file) only what a resume added to a part an earlier run left."""
    store = _store(tmp_path)
    with client(lambda r: range_response(r, payload)) as http:
        store.fetch(http, URL, size=len(payload))
        assert store.bytes_fetched == len(payload)
        other = URL.replace("six-", "six-copy-")
        third = len(payload) // 3
        part = tmp_path / "tmp" / f"{store_module._url_key(other)}.part"
        part.write_bytes(payload[:third])  # what a cut run left
        store.fetch(http, other, size=len(payload))
        assert store.bytes_fetched == len(payload) + len(payload) - third
        whole = URL.replace("six-", "six-whole-")
        part = tmp_path / "tmp" / f"{store_module._url_key(whole)}.part"
        part.write_bytes(payload)  # a run that got every byte, then was stopped
        store.fetch(http, whole, size=len(payload))
    assert store.bytes_fetched == len(payload) + len(payload) - third


def test_a_url_that_gave_other_bytes_before_is_asked_again(
    tmp_path: Path, payload: bytes
) -> None:
    """The URL gave one file last time; a lock now expects another sha256 from
    it: the stored file is not handed out for it (the URL is asked again, and
    the bytes it still sends are refused)."""
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, content=payload)

    store = _store(tmp_path)
    with client(handler) as http:
        store.fetch(http, URL)
        with pytest.raises(HashMismatchError):
            store.fetch(http, URL, expected_sha256="0" * 64)
    assert len(requests) == 2


def test_a_file_the_archive_gave_counts_whole_as_fetched(
    tmp_path: Path, payload: bytes
) -> None:
    """Asked first (``--archive-first``), the archive gives the file into a part
    of its own: every byte it sent counts, as a download's do."""
    from stacklock.lockarchive import Archive

    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, content=payload)

    sha = hashlib.sha256(payload).hexdigest()
    store = ArtifactStore(tmp_path, archive=Archive(url="https://archive.example/w",
                                                    first=True))
    with client(handler) as http:
        store.fetch(http, URL, expected_sha256=sha, size=len(payload))
    assert [u.split("/")[2] for u in asked] == ["archive.example"]
    assert store.from_archive == [("six-1.17.0-py2.py3-none-any.whl", "archive first")]
    assert store.bytes_fetched == len(payload)
