"""A resolution is freed by reference counting, not left to the cycle collector.

PackageSource memoises its jobs, and each job is a closure over the source; a
failed job keeps its error. Left as they were, both made the whole resolution
(pages, candidates, METADATA: 150,000 objects for a 207-package stack) a
reference cycle, freed only by the collector's full passes during the resolve and
at exit. These tests run with the collector off and check that nothing is kept.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacklock.errors import (
    DownloadError,
    HashMismatchError,
    IndexesUnreachable,
    IndexUnreadable,
    MetadataError,
    ProfileError,
    SdistBuildError,
)
from stacklock.resolve.source import PackageSource, _Job


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _failing(error: BaseException) -> _Job:
    def fail() -> None:
        raise error
    return _Job(fail)


def test_a_failed_job_raises_a_copy_each_time_and_keeps_no_frames(no_collector):
    job = _failing(MetadataError("wheel.whl: no METADATA", hint="try --refresh"))
    raised = []
    for _ in range(3):
        with pytest.raises(MetadataError) as caught:
            job.result()
        raised.append(caught.value)
    assert [e.args for e in raised] == [("wheel.whl: no METADATA",)] * 3
    assert {e.hint for e in raised} == {"try --refresh"}
    assert len({id(e) for e in raised}) == 3  # each ask raises its own
    kept = job.future.exception()
    assert kept is not None and kept.__traceback__ is None
    alive = weakref.ref(job)
    del job, caught, raised, kept
    assert alive() is None  # no frame of result() keeps it


_ERRORS = [
    IndexUnreadable("HTTP 503", index="pypi", url="https://pypi.org/simple",
                    hint="try again", network=True),
    IndexesUnreachable([IndexUnreadable("refused", index="a", url="https://a/simple",
                                        network=True),
                        IndexUnreadable("timed out", index="b", url="https://b/simple",
                                        network=True)]),
    ProfileError("not a version", path="p.toml", key="requirements.packages[0]"),
    DownloadError("HTTP 404", url="https://files.example/x.whl"),
    HashMismatchError(url="https://files.example/x.whl", expected="aa", actual="bb"),
    SdistBuildError("the build failed", hint="see the log", needs="torch",
                    log=Path("/tmp/build.log")),
]


@pytest.mark.parametrize("error", _ERRORS, ids=lambda e: type(e).__name__)
def test_a_copy_keeps_what_the_class_sets_beyond_its_message(no_collector, error):
    with pytest.raises(type(error)) as caught:
        _failing(error).result()
    assert caught.value is not error
    assert str(caught.value) == str(error)
    assert caught.value.exit_code == error.exit_code
    assert vars(caught.value) == vars(error)


def test_a_bug_is_raised_as_it_is_with_its_frames(no_collector):
    bug = ZeroDivisionError("a bug")
    job = _failing(bug)
    with pytest.raises(ZeroDivisionError) as first:
        job.result()
    with pytest.raises(ZeroDivisionError) as second:
        job.result()
    assert first.value is second.value is bug
    frames = [tb.tb_frame.f_code.co_name for tb in _walk(first.value.__traceback__)]
    assert "fail" in frames  # where the bug is, for its report


def _walk(tb):  # type: ignore[no-untyped-def]
    while tb is not None:
        yield tb
        tb = tb.tb_next


class _NoIndex:
    """A finder with no versions of anything."""

    def version_groups(self, name: str) -> list[object]:
        return []

    def is_local(self, name: str) -> bool:
        return True


def test_a_closed_source_is_freed_with_its_jobs(no_collector):
    source = PackageSource(_NoIndex(), object(), environment={}, prefetch=False)
    with source:
        assert source.candidates("six") == []
        assert source.candidates("six") == []  # memoised: the same job
    alive = weakref.ref(source)
    del source
    assert alive() is None
