"""Finder on real pages: tags, abi3, requires-python, yanked, the exclude-newer
cut-off, build tags, and the first-index / pinned-index strategy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from packaging.tags import Tag
from packaging.utils import parse_wheel_filename

from stacklock.index.finder import (
    NO_UPLOAD_TIME_NOTE,
    SDIST_NOTE,
    SDIST_REASON,
    Finder,
    evaluate_link,
    is_exact_pin,
)
from stacklock.index.pages import Link
from stacklock.profile import IndexSpec
from stacklock.target import Target
from tests.helpers.data import SGL_PAGES, recorded_pypi

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PYPI = IndexSpec(name="pypi", url="https://pypi.org/simple")
SGL = IndexSpec(name="sgl-cu130", url=str(SGL_PAGES / "cu130"))


@pytest.fixture
def finder_for(make_client):
    def make(indexes, target=None, **kwargs):
        client = make_client(recorded_pypi, cache_dir=None)
        return Finder(client, indexes, target or Target(), **kwargs)
    return make


def test_sgl_cu130_for_cp312_x86_64(finder_for):
    target = Target(python="3.12")
    evaluations = finder_for([SGL], target).evaluate("sgl-kernel")
    assert len(evaluations) == 50
    accepted = set(target.tags())
    for ev in evaluations:
        tags = parse_wheel_filename(ev.link.filename)[3]
        assert ev.compatible == bool(tags & accepted)
        if not ev.compatible:
            assert ev.reason.startswith("no tag fits cp312/manylinux_2_28_x86_64")
            assert "aarch64" in ev.reason
    best = finder_for([SGL], target).find_candidates("sgl-kernel")
    assert best[0].version == max(ev.version for ev in evaluations)
    # abi3 wheels built for cp310 fit cp312, but rank below the cp312 abi3 build
    cp312 = next(ev for ev in best if "-cp312-abi3-" in ev.link.filename)
    cp310 = next(ev for ev in best if "-cp310-abi3-" in ev.link.filename
                 and ev.version == cp312.version)
    assert cp312.tag_rank < cp310.tag_rank
    assert best.index(cp312) < best.index(cp310)
    # the five 0.3.21 cp310 x86_64 duplicates all stay candidates, hashes distinct
    dupes = [ev for ev in best if ev.link.filename ==
             "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"]
    assert len({ev.link.sha256 for ev in dupes}) == 5


def test_aarch64_target_takes_the_other_half(finder_for):
    target = Target(python="3.12", platform="linux_aarch64")
    best = finder_for([SGL], target).find_candidates("sgl-kernel")
    assert best and all("aarch64" in ev.link.filename for ev in best)


def test_requires_python_on_a_real_page(finder_for):
    finder = finder_for([PYPI], Target(python="3.9"))
    evaluations = finder.evaluate("packaging")
    blocked = [ev for ev in evaluations
               if ev.reason and ev.reason.startswith("requires-python")]
    assert blocked
    for ev in blocked:  # py3-none-any fits the tags; only requires-python stops it
        assert ev.link.filename.endswith(("-py3-none-any.whl", ".tar.gz"))
        assert ev.link.requires_python in ev.reason and "3.9.0" in ev.reason
    newest_ok = finder.find_candidates("packaging")[0]
    assert all(ev.version > newest_ok.version for ev in blocked
               if ev.link.yanked is None)


def test_build_tags_order_candidates(finder_for):
    best = finder_for([PYPI], Target(python="3.12")).find_candidates(
        "torch", specifier="==2.10.0")
    names = [ev.link.filename for ev in best]
    assert names[:2] == ["torch-2.10.0-3-cp312-cp312-manylinux_2_28_x86_64.whl",
                         "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert best[0].build == (3, "") and best[1].build == ()


def test_sdists_fit_only_where_no_wheel_of_their_version_does(finder_for):
    finder = finder_for([PYPI], Target(python="3.12"))
    evaluations = finder.evaluate("urllib3")  # 1.0 .. 1.4 published no wheel
    sdists = [ev for ev in evaluations if ev.compatible and not ev.link.is_wheel]
    assert sdists and all(ev.note == SDIST_NOTE for ev in sdists)
    wheel_versions = {ev.version for ev in evaluations
                      if ev.compatible and ev.link.is_wheel}
    sdist_only = {ev.version for ev in sdists} - wheel_versions
    found = finder.find_candidates("urllib3")
    # a version's sdist is a candidate only when none of its wheels fits
    assert {ev.version for ev in found if not ev.link.is_wheel} == sdist_only
    assert sdist_only and wheel_versions <= {ev.version for ev in found}
    # and a wheel always ranks before an sdist
    assert found[0].link.is_wheel


@pytest.mark.parametrize("no_build", [True, frozenset({"urllib3"})])
def test_no_build_refuses_sdists(finder_for, no_build):
    finder = finder_for([PYPI], Target(python="3.12"), no_build=no_build)
    sdists = [ev for ev in finder.evaluate("urllib3") if not ev.link.is_wheel]
    assert sdists and all(ev.reason == SDIST_REASON for ev in sdists)
    assert all(ev.link.is_wheel for ev in finder.find_candidates("urllib3"))


def test_no_build_of_another_project_keeps_these_sdists(finder_for):
    finder = finder_for([PYPI], Target(python="3.12"),
                        no_build=frozenset({"torch"}))
    assert any(not ev.link.is_wheel for ev in finder.find_candidates("urllib3"))


def test_yanked_is_skipped_unless_pinned_exactly(finder_for):
    finder = finder_for([PYPI], Target(python="3.12"))
    yanked = [ev for ev in finder.evaluate("urllib3") if ev.link.yanked is not None]
    assert yanked
    ev = next(e for e in yanked
              if e.link.filename == "urllib3-1.25-py2.py3-none-any.whl")
    assert not ev.compatible and ev.reason == "yanked: Broken release"
    assert all(e.version != ev.version for e in finder.find_candidates(
        "urllib3", specifier=">=1.24,<1.26"))
    pinned = finder.find_candidates("urllib3", specifier="==1.25")
    assert [e.link.filename for e in pinned] == [ev.link.filename]
    assert "allowed by the exact pin" in pinned[0].note
    assert is_exact_pin("==1.25") and is_exact_pin("===1.25")
    assert not is_exact_pin("==1.*") and not is_exact_pin(">=1,<2")


def test_exclude_newer_cut_off(finder_for):
    cutoff = datetime(2025, 1, 1, tzinfo=UTC)
    free = finder_for([PYPI], Target(python="3.12")).evaluate("torch")
    cut = finder_for([PYPI], Target(python="3.12"),
                     exclude_newer=cutoff).evaluate("torch")
    assert [ev.link for ev in free] == [ev.link for ev in cut]
    newly_blocked = 0
    for before, after in zip(free, cut, strict=True):
        late = before.link.upload_time > cutoff
        if before.compatible and late:
            newly_blocked += 1
            assert not after.compatible
            assert after.reason == (
                f"uploaded {before.link.upload_time.isoformat()}, after the "
                "exclude-newer cut-off 2025-01-01T00:00:00+00:00")
        else:
            assert (after.compatible, after.reason) == (before.compatible,
                                                        before.reason)
    assert newly_blocked > 0
    candidates = [ev for ev in cut if ev.compatible]
    assert candidates and all(ev.link.upload_time <= cutoff for ev in candidates)
    assert str(candidates[0].version).startswith("2.5.")


def test_no_upload_time_is_kept_under_a_cut_off_with_a_note(finder_for):
    finder = finder_for([SGL], Target(), exclude_newer=datetime(2000, 1, 1,
                                                               tzinfo=UTC))
    candidates = finder.find_candidates("sgl-kernel")
    assert candidates
    assert all(ev.note == NO_UPLOAD_TIME_NOTE for ev in candidates)


def test_first_index_that_has_it_wins_and_indexes_are_not_mixed(finder_for):
    finder = finder_for([SGL, PYPI], Target(python="3.12"))
    assert finder.index_for("sgl-kernel") == SGL
    assert finder.index_for("torch") == PYPI  # no torch folder on the sgl index
    assert finder.index_for("not-anywhere") is None
    assert finder.find_candidates("not-anywhere") == []
    assert {ev.index for ev in finder.find_candidates("sgl-kernel")} == {"sgl-cu130"}
    every = finder.evaluate("sgl-kernel", all_indexes=True)
    from_pypi = [ev for ev in every if ev.index == "pypi"]
    assert from_pypi and all(not ev.compatible for ev in from_pypi)
    assert all("comes from index 'sgl-cu130'" in ev.reason for ev in from_pypi)


def test_a_pinned_project_comes_only_from_its_index(finder_for):
    pinned = IndexSpec(name="pypi", url="https://pypi.org/simple",
                       packages=("sgl-kernel",))
    finder = finder_for([SGL, pinned], Target(python="3.12"))
    assert finder.index_for("sgl_kernel") == pinned
    assert {ev.index for ev in finder.find_candidates("sgl-kernel")} == {"pypi"}
    others = [ev for ev in finder.evaluate("sgl-kernel", all_indexes=True)
              if ev.index == "sgl-cu130"]
    assert len(others) == 50
    assert all(ev.reason == "not allowed on this index: sgl-kernel is pinned to "
               "index 'pypi'" for ev in others)


def test_evaluate_link_reasons_for_odd_links():
    target = Target(python="3.12")
    other = evaluate_link(Link(filename="numpy-2.0.0-cp312-cp312-linux_x86_64.whl",
                               url="https://x/numpy.whl"),
                          index="i", project="torch", target=target)
    assert other.reason == "file of project 'numpy', not 'torch'"
    bad_rp = evaluate_link(
        Link(filename="torch-2.0.0-cp312-cp312-linux_x86_64.whl", url="https://x/t",
             requires_python=">=3.8,<<4"), index="i", project="torch", target=target)
    assert bad_rp.compatible and "ignored invalid requires-python" in bad_rp.note
    assert bad_rp.tag_rank == target.tags().index(
        Tag("cp312", "cp312", "linux_x86_64"))


def test_a_wheel_ranks_by_its_best_tag_not_its_worst(make_client):
    """fastrlock 0.8.3 (PyPI's real page, recorded for the cupy case) has two
    cp311 wheels for x86_64 whose tags end the same (manylinux_2_5, manylinux1)
    and differ in their newest: manylinux_2_28 against manylinux_2_24. For a
    glibc 2.28 target the first fits best (its best tag is the target's first);
    ranked by their worst tags they would tie, and the file name would choose."""
    from tests.helpers.cassette import ReplayTransport
    from tests.helpers.data import DATA

    transport = ReplayTransport(DATA / "resolve" / "cassettes" / "cupy134-cudnn9")
    finder = Finder(make_client(transport, cache_dir=None), [PYPI],
                    Target(python="3.11", manylinux="2_28"))
    found = finder.find_candidates("fastrlock", specifier="==0.8.3")
    linux = [ev for ev in found if "x86_64" in ev.link.filename
             and "musllinux" not in ev.link.filename]
    assert [ev.link.filename for ev in linux[:2]] == [
        "fastrlock-0.8.3-cp311-cp311-manylinux_2_5_x86_64.manylinux1_x86_64"
        ".manylinux_2_28_x86_64.whl",
        "fastrlock-0.8.3-cp311-cp311-manylinux_2_5_x86_64.manylinux1_x86_64"
        ".manylinux_2_24_x86_64.whl"]
    assert linux[0].tag_rank == 0 and linux[0].tag_rank < linux[1].tag_rank


def test_a_file_name_that_is_no_wheel_or_sdist_never_fits():
    link = Link(filename="six-1.17.0.exe", url="https://files.example/six-1.17.0.exe")
    found = evaluate_link(link, index="pypi", project="six", target=Target())
    assert (found.compatible, found.version, found.tag_rank) == (False, None, None)
    assert found.reason


def test_exclude_newer_keeps_a_file_uploaded_at_the_cut_off():
    """uv's exclude-newer drops what was uploaded after the moment: a file
    uploaded at it exactly stays; a microsecond later does not."""
    from datetime import timedelta

    cut = datetime(2026, 2, 15, tzinfo=UTC)
    wheel = "six-1.17.0-py2.py3-none-any.whl"
    at = [evaluate_link(Link(filename=wheel, url=f"https://f.example/{wheel}",
                             upload_time=when), index="pypi", project="six",
                        target=Target(), exclude_newer=cut)
          for when in (cut, cut + timedelta(microseconds=1))]
    assert at[0].compatible and not at[1].compatible
    assert "exclude-newer" in (at[1].reason or "")
