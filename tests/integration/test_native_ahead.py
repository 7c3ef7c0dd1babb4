"""The native check's reads start while the resolver pins candidates
(:class:`stacklock.native.ahead.ReadAhead` through ``NativeGate.pinned``): a
read started ahead is not repeated by the check, the large member a pair asks
for is read before the set is complete, a stopped read ends at its next answer
and saves nothing, and a failed read ahead is met again by the check. Two
wheels built here with gcc (a provider whose library counts as large, an
extension built against another build of it), served from their real bytes."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from stacklock.errors import NativeError
from stacklock.native import NativeWheel, WheelReader, check_native
from stacklock.native.ahead import ReadAhead, _Workers
from stacklock.native.wheel import ReadStopped
from stacklock.profile import load_profile
from stacklock.resolve.hashes import LockedWheel
from stacklock.resolve.locking import NativeGate
from stacklock.resolve.result import ResolvedPackage
from tests.helpers.ranges import range_response
from tests.integration.test_native_large import TARGET, _wheels


class _Server:
    """The wheels' bytes by range; ``asked`` counts requests per filename,
    ``fail`` names wheels answered 404, ``hold`` pauses answers until set."""

    def __init__(self, wheels: list[Path]) -> None:
        self.bodies = {f"https://files.example.org/{w.name}": w.read_bytes()
                       for w in wheels}
        self.asked: Counter[str] = Counter()
        self.fail: set[str] = set()
        self.hold = threading.Event()
        self.hold.set()
        self.waiting = threading.Event()
        self._lock = threading.Lock()

    def serve(self, request: httpx.Request) -> httpx.Response:
        name = str(request.url).rsplit("/", 1)[-1]
        with self._lock:
            self.asked[name] += 1
        self.waiting.set()
        assert self.hold.wait(10)
        if name in self.fail:
            return httpx.Response(404, request=request)
        return range_response(request, self.bodies[str(request.url)])

    def native(self) -> list[NativeWheel]:
        return [NativeWheel(package=url.rsplit("/", 1)[-1].split("-")[0],
                            version="1.0", filename=url.rsplit("/", 1)[-1],
                            url=url, sha256=hashlib.sha256(body).hexdigest(),
                            size=len(body))
                for url, body in self.bodies.items()]

    def reader(self, cache: Path) -> WheelReader:
        http = httpx.Client(transport=httpx.MockTransport(self.serve))
        return WheelReader(http, cache_dir=cache)


@pytest.fixture
def server(tmp_path, monkeypatch) -> _Server:
    monkeypatch.setattr("stacklock.native.wheel.LARGE_MEMBER", 0)
    return _Server(_wheels(tmp_path / "built", consumer_needs_gone=True))


def test_reads_ahead_are_not_repeated_by_the_check(tmp_path, server):
    wheels = server.native()
    plain = check_native(wheels, reader=server.reader(tmp_path / "plain"), **TARGET)
    alone = dict(server.asked)
    server.asked.clear()

    reader = server.reader(tmp_path / "ahead")
    ahead = ReadAhead(reader, threads=4, speculative=True)
    for wheel in wheels:
        ahead.add(wheel)
    ahead.wait()
    # the pair asked for the provider's large library before any check ran
    provider = wheels[0]
    assert ahead.read[provider.sha256].large == ()
    assert [o.path for o in ahead.read[provider.sha256].objects] == \
        ["prov/lib/libprov.so"]
    ahead_asked = dict(server.asked)
    # left without stop(): its threads end once idle, holding no exit
    for thread in threading.enumerate():
        if thread.name.startswith("stacklock-native"):
            thread.join(10)
    assert not [t for t in threading.enumerate()
                if t.name.startswith("stacklock-native")]
    report = check_native(wheels, reader=reader, **TARGET)
    assert dict(server.asked) == ahead_asked == alone  # nothing asked twice
    assert report.findings == plain.findings
    assert [f.missing for f in report.findings] == ["prov_gone"]


def test_the_gate_reads_pinned_wheels_before_it_is_called(tmp_path, server):
    check_native(server.native(), reader=server.reader(tmp_path / "plain"), **TARGET)
    alone = dict(server.asked)  # what the check asks of a cold cache
    server.asked.clear()
    profile = load_profile("pypi-small")
    gate = NativeGate(profile, http=httpx.Client(
        transport=httpx.MockTransport(server.serve)), offline=False,
        cache_dir=tmp_path / "cache")
    packages = []
    for wheel in server.native():
        locked = LockedWheel(filename=wheel.filename, url=wheel.url,
                             sha256=wheel.sha256, hash_source="index",
                             size=wheel.size)
        name = canonicalize_name(wheel.package)
        gate.pinned(name, Version("1.0"), locked)
        packages.append(ResolvedPackage(
            name=name, version=Version("1.0"), index_name="pypi",
            index_url="https://files.example.org/", dependencies=(), wheel=locked))
    deadline = time.monotonic() + 20
    while dict(server.asked) != alone and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # nothing more is asked
    before = dict(server.asked)
    assert before == alone  # every read the check needs, before it was called
    passed = gate(packages)
    # then only the sources of the package with a finding (native.sources: is
    # the object loaded by an import of it?), one read of its tail
    cons = next(w.filename for w in server.native() if w.package == "cons")
    assert dict(server.asked) == {**before, cons: before[cons] + 1}
    assert [(p.name, str(p.version)) for p in passed] == [("cons", "1.0")]
    assert gate.report is not None
    assert gate.report.bytes_read > 0  # the reads ahead count as the check's
    gate.stop()


def test_a_stopped_read_ends_at_its_next_answer_and_saves_nothing(tmp_path, server):
    provider = server.native()[0]
    reader = server.reader(tmp_path / "cache")
    stop = threading.Event()
    server.hold.clear()
    failure: list[BaseException] = []

    def read() -> None:
        try:
            reader.read(provider, stop=stop)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    assert server.waiting.wait(10)  # the first request is at the server
    stop.set()
    server.hold.set()
    thread.join(10)
    assert not thread.is_alive()
    assert [type(f) for f in failure] == [ReadStopped]
    assert sum(server.asked.values()) == 1  # no request after the stop
    assert not list((tmp_path / "cache").rglob("*.json.gz"))  # nothing saved


def test_a_failed_read_ahead_is_met_again_by_the_check(tmp_path, server):
    wheels = server.native()
    server.fail.add(wheels[1].filename)
    reader = server.reader(tmp_path / "cache")
    ahead = ReadAhead(reader, threads=2, speculative=True)
    for wheel in wheels:
        ahead.add(wheel)
    ahead.wait()  # speculative: the failure is not raised here
    with pytest.raises(NativeError, match="cannot read the wheel"):
        check_native(wheels, reader=reader, **TARGET)


def test_work_is_taken_by_priority_then_in_order():
    workers = _Workers(1)
    started = threading.Event()
    release = threading.Event()
    order: list[str] = []
    done = threading.Semaphore(0)

    def blocker() -> None:
        started.set()
        assert release.wait(10)
        done.release()

    def task(name: str):
        def run() -> None:
            order.append(name)
            done.release()
        return run

    assert workers.submit((0, 0), blocker)
    assert started.wait(10)
    for priority, name in [((3, 5), "small other"), ((3, 1), "smaller other"),
                           ((1, 0), "large"), ((2, 9), "owner"),
                           ((3, 1), "smaller other, later")]:
        assert workers.submit(priority, task(name))
    release.set()
    for _ in range(6):
        assert done.acquire(timeout=10)
    assert order == ["large", "owner", "smaller other", "smaller other, later",
                     "small other"]
    assert workers.close() == []
    assert not workers.submit((0, 0), task("after close"))


def test_no_thread_to_read_is_a_failure_not_a_hang(tmp_path, server, monkeypatch):
    """The listers start; the reads they then ask for find no thread (a
    worker's own submit fails): the check raises instead of waiting."""
    start = threading.Thread.start
    started: list[str] = []

    def start_listers_only(self) -> None:
        if len(started) >= 2:  # the two listers ran; nothing more starts
            raise RuntimeError("can't start new thread")
        started.append(self.name)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", start_listers_only)
    reader = server.reader(tmp_path / "cache")
    done: list[BaseException] = []

    def check() -> None:
        try:
            check_native(server.native(), reader=reader, **TARGET)
        except BaseException as exc:
            done.append(exc)

    runner = threading.Thread(target=check)
    started.clear()
    start(runner)
    runner.join(20)
    assert not runner.is_alive()  # the previous code waited here for ever
    assert [str(e) for e in done] == ["can't start new thread"]


_STALLED_EXIT = """
import sys, threading, time, httpx
from stacklock.native import NativeWheel, WheelReader
from stacklock.native.ahead import ReadAhead
url, cache = sys.argv[1], sys.argv[2]
reader = WheelReader(httpx.Client(timeout=60), cache_dir=cache)
ahead = ReadAhead(reader, threads=2, speculative=True)
name = "slow-1.0-py3-none-any.whl"
ahead.add(NativeWheel(package="slow", version="1.0", filename=name,
                      url=f"{url}/{name}", sha256="0" * 64, size=None))
time.sleep(1.0)  # the directory read is at the server, which never answers
ahead.stop()
print("stopped", flush=True)
"""


def test_a_read_ahead_stalled_on_a_server_does_not_hold_the_exit(tmp_path):
    """A read ahead of the resolver that a server never answers is not joined
    when the command ends: the process exits at once, not after the client's
    60 s read timeout."""
    import subprocess
    import sys
    from http.server import BaseHTTPRequestHandler

    from tests.helpers.loopback import loopback

    asked = threading.Event()
    release = threading.Event()

    class Stall(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            asked.set()
            release.wait(90)  # never answers while the client is there

    with loopback(Stall) as url:
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-c", _STALLED_EXIT, url,
                                   str(tmp_path / "cache")], capture_output=True,
                                  text=True, timeout=40)
        finally:
            release.set()
        took = time.monotonic() - started
    assert asked.is_set()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"
    assert took < 15  # the previous code waited for the 60 s timeout


@pytest.mark.parametrize("first", ["provider", "consumer"])
def test_a_library_is_read_when_named_in_either_order(tmp_path, server, first):
    """The set grows one wheel at a time. Alone, neither wheel is read: no
    other wheel ships a library to link, or has objects to link one. With
    both, the consumer is read (the provider ships a library), its extension
    names the provider's, and the provider is read then, whichever came
    first."""
    provider, consumer = server.native()
    order = [provider, consumer] if first == "provider" else [consumer, provider]
    ahead = ReadAhead(server.reader(tmp_path / "cache"), threads=2, speculative=True)
    ahead.add(order[0])
    ahead.wait()
    assert ahead.read == {}
    ahead.add(order[1])
    ahead.wait()
    assert ahead.read[consumer.sha256].objects
    assert [o.path for o in ahead.read[provider.sha256].objects] == \
        ["prov/lib/libprov.so"]
    assert server.asked[provider.filename] == 2  # its directory, then the library
