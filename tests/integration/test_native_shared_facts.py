"""Facts shared through STACKLOCK_NATIVE_FACTS: a second machine with an empty
cache reads no wheel member when a first machine's ``native/`` folder is shared
as a folder or over HTTP; a broken, foreign, oversized or unreachable entry is
a miss (the wheel is read, the verdict is the same). Real wheels (markupsafe's
extension module, a built wheel shipping it as a library) on a loopback index."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from stacklock.errors import StacklockError
from stacklock.native import shared as shared_module
from stacklock.native import wheel as native_wheel
from stacklock.native.shared import ENV
from stacklock.resolve.locking import lock_profile, render_native
from tests.helpers.loopback import loopback
from tests.helpers.native_facts import MARKUPSAFE
from tests.integration.test_native_listings import (  # the same loopback index
    _facts,
    _Index,
    _verdict,
    served,
)


@pytest.fixture
def index(tmp_path):
    with served(tmp_path) as made:
        yield made


def _files(folder: Path, *, fail: bool = False) -> type[BaseHTTPRequestHandler]:
    """Serves ``folder``'s files by name; 404 for others; 500 for all if ``fail``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = folder / urlsplit(self.path).path.rsplit("/", 1)[-1]
            if fail or not path.is_file():
                self.send_error(500 if fail else 404)
                return
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _first_machine(tmp_path: Path, index: _Index):
    """The first machine's resolve: it reads the wheels and fills its cache."""
    first = lock_profile(str(index.profile), output=tmp_path / "first.toml",
                         cache_dir=tmp_path / "first")
    index.wheel_requests()
    assert first.native is not None and first.native.bytes_read > 0
    return first


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wheels_with_objects(first) -> int:
    return sum(bool(n) for n in first.native.bytes_by_wheel.values())


@pytest.mark.parametrize("how", ["folder", "http"])
def test_a_second_machine_reads_no_wheel_member(tmp_path, index, monkeypatch, how):
    first = _first_machine(tmp_path, index)
    shared = tmp_path / "first" / "native"
    plain = lock_profile(str(index.profile), output=tmp_path / "plain.toml",
                         check=False, cache_dir=tmp_path / "plain")
    metadata_only = index.wheel_requests()  # what a resolve asks without a check
    assert plain.native is None
    with loopback(_files(shared)) as base:
        monkeypatch.setenv(ENV, str(shared) if how == "folder" else f"{base}/native")
        second = lock_profile(str(index.profile), output=tmp_path / "second.toml",
                              cache_dir=tmp_path / "second")
    assert index.wheel_requests() == metadata_only  # the check asked nothing
    assert second.native is not None
    assert (second.native.bytes_read, second.native.requests) == (0, 0)
    assert second.native.shared == len(_facts(tmp_path / "first"))
    assert second.native.shared_failures == ()
    assert second.text == first.text
    assert _verdict(second.native) == {
        **_verdict(first.native), "facts_shared": second.native.shared}
    assert _facts(tmp_path / "second") == _facts(tmp_path / "first")  # kept here
    assert "facts of 6 wheels from STACKLOCK_NATIVE_FACTS" in \
        render_native(second.native)[0]


def test_broken_foreign_and_oversized_entries_are_misses(tmp_path, index,
                                                         monkeypatch):
    first = _first_machine(tmp_path, index)
    shared = tmp_path / "shared"
    shutil.copytree(tmp_path / "first" / "native", shared)
    entries = sorted(shared.glob("*.json.gz"))
    markupsafe = shared / f"{_sha256(MARKUPSAFE)}.json.gz"
    bigdir = shared / f"{_sha256(next((tmp_path / 'built').glob('*.whl')))}.json.gz"
    assert markupsafe in entries and bigdir in entries
    markupsafe.write_bytes(b"\x1f\x8b not gzip at all")  # torn
    other = json.loads(gzip.decompress(bigdir.read_bytes()))
    other["sha256"] = "0" * 64  # another wheel's facts under this name
    bigdir.write_bytes(gzip.compress(json.dumps(other).encode()))
    monkeypatch.setenv(ENV, str(shared))
    second = lock_profile(str(index.profile), output=tmp_path / "second.toml",
                          cache_dir=tmp_path / "second")
    asked = index.wheel_requests()
    assert asked[MARKUPSAFE.name] >= 1 and asked["bigdir-1.0-py3-none-any.whl"] >= 1
    assert second.native is not None and second.native.bytes_read > 0
    assert second.native.shared == len(entries) - 2
    # there but unusable: said (a login page answering every URL would be too)
    assert sorted(second.native.shared_failures) == sorted(
        f"{entry.name}: not a facts entry of this stacklock for this wheel"
        for entry in (markupsafe, bigdir))
    assert second.text == first.text
    assert second.native.objects == first.native.objects == 4
    # an entry inflating past the limit is not read whole: a miss
    monkeypatch.setattr(native_wheel, "_ENTRY_LIMIT", 64)
    third = lock_profile(str(index.profile), output=tmp_path / "third.toml",
                         cache_dir=tmp_path / "third")
    assert third.native is not None and third.native.shared == 0
    assert len(third.native.shared_failures) == len(entries)
    assert third.text == first.text


def test_a_failing_source_is_a_warning_and_the_wheels_are_read(tmp_path, index,
                                                               monkeypatch):
    first = _first_machine(tmp_path, index)
    with loopback(_files(tmp_path, fail=True)) as base:
        # credentials in the source's URL never reach the warning
        monkeypatch.setenv(ENV, base.replace("http://", "http://ci:s3cret@")
                           + "/native/")
        second = lock_profile(str(index.profile), output=tmp_path / "second.toml",
                              cache_dir=tmp_path / "second")
    assert second.native is not None and second.native.shared == 0
    assert second.native.bytes_read == first.native.bytes_read
    assert len(second.native.shared_failures) == len(_facts(tmp_path / "first"))
    assert all("HTTP 500" in failure for failure in second.native.shared_failures)
    assert "s3cret" not in "\n".join(render_native(second.native))
    warning = [line for line in render_native(second.native) if "warning:" in line]
    assert len(warning) == 1 and "STACKLOCK_NATIVE_FACTS failed for 6 entries" \
        in warning[0]
    assert second.text == first.text
    assert _wheels_with_objects(second) == _wheels_with_objects(first)


def test_an_entry_sent_already_inflated_is_read() -> None:
    """A server that stored the entry with ``Content-Encoding: gzip``: httpx
    hands over the JSON itself."""
    entry = {"format": 1, "sha256": "ab" * 32, "files": [], "objects": []}
    found = native_wheel._parse_entry(json.dumps(entry).encode(), "AB" * 32)
    assert found is not None and found.sha256 == "ab" * 32 and found.files == ()
    assert native_wheel._parse_entry(b"[1, 2]", "ab" * 32) is None
    assert native_wheel._parse_entry(json.dumps(entry).encode(), "cd" * 32) is None


def test_offline_a_folder_is_asked_a_url_is_not(tmp_path) -> None:
    from stacklock.native.shared import SharedFacts

    with httpx.Client() as http:
        folder = SharedFacts.from_env(http, offline=True,
                                      environ={ENV: str(tmp_path)})
        url = SharedFacts.from_env(http, offline=True,
                                   environ={ENV: "https://ci.example.com/facts"})
        online = SharedFacts.from_env(http, environ={ENV: " https://x.example/f "})
        unset = SharedFacts.from_env(http, environ={ENV: ""})
    assert folder is not None and folder.where == str(tmp_path)
    assert url is None and unset is None
    assert online is not None and online.where == "https://x.example/f"


def test_a_wrong_source_is_one_line_naming_the_variable(tmp_path) -> None:
    from stacklock.native.shared import SharedFacts

    with httpx.Client() as http:
        found = SharedFacts.from_env(http, environ={ENV: tmp_path.as_uri()})
        assert found is not None and found.where == str(tmp_path)
        for wrong, said in [(str(tmp_path / "nowhere"), "no such folder"),
                            ("s3://bucket/facts", "not a folder or an http")]:
            with pytest.raises(StacklockError, match=said) as raised:
                SharedFacts.from_env(http, environ={ENV: wrong})
            assert ENV in str(raised.value) and raised.value.exit_code == 2


def test_a_folder_entry_over_the_body_cap_is_a_failure_not_read(
        tmp_path, monkeypatch) -> None:
    from stacklock.native.shared import SharedFacts

    (tmp_path / f"{'ab' * 32}.json.gz").write_bytes(b"\x1f\x8b" + b"0" * 4096)
    monkeypatch.setenv("STACKLOCK_MAX_BODY_BYTES", "1024")
    with httpx.Client() as http:
        source = SharedFacts(str(tmp_path), http)
        assert source.entry("AB" * 32) is None
        assert source.entry("cd" * 32) is None  # not there: no failure
    assert source.failures == [f"{'ab' * 32}.json.gz: over 1024 bytes"]


def test_a_stalled_source_costs_one_deadline_not_one_per_wheel(
        tmp_path, index, monkeypatch) -> None:
    """A server that takes the request and never answers: the first entries
    time out, the rest are not asked; every wheel is read, the same lock."""
    first = _first_machine(tmp_path, index)
    asked: list[str] = []
    release = threading.Event()

    class Stall(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            release.wait(30)  # answers nothing until the test ends

    monkeypatch.setattr(shared_module, "DEADLINE", 0.5)
    try:
        with loopback(Stall) as base:
            monkeypatch.setenv(ENV, f"{base}/native")
            second = lock_profile(str(index.profile),
                                  output=tmp_path / "second.toml",
                                  cache_dir=tmp_path / "second")
    finally:
        release.set()
    assert second.native is not None and second.native.shared == 0
    assert second.text == first.text
    failures = second.native.shared_failures
    assert len(failures) == len(_facts(tmp_path / "first"))
    timed_out = [f for f in failures if "not asked" not in f]
    assert 1 <= len(asked) == len(set(asked)) == len(timed_out)  # once each at most
    assert all("Timeout" in f for f in timed_out)
    # asked one after another, the second entry is not asked at all
    asked.clear()
    release.clear()
    try:
        with loopback(Stall) as base, httpx.Client() as http:
            source = shared_module.SharedFacts(f"{base}/native", http)
            assert source.entry("ab" * 32) is None
            assert source.entry("cd" * 32) is None
    finally:
        release.set()
    assert len(asked) == 1
    assert "Timeout" in source.failures[0]
    assert source.failures[1].startswith(f"{'cd' * 32}.json.gz: not asked (the "
                                         "source failed before: ReadTimeout")
