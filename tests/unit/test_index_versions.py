"""Versions judged lazily (stacklock.index.versions) give exactly what judging
every file gives (Finder.find_candidates, grouped by version), on real recorded
pages: PyPI JSON (torch with build tags, sglang, urllib3 with sdists and yanked
files, flashinfer-python), sgl-kernel's index (one file name with up to five
hashes) and a PyTorch nightly page (``%2B`` in its names); and nothing is judged
before a version is asked for."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import pytest

from stacklock.index.finder import Finder
from stacklock.profile import IndexSpec
from stacklock.target import Target
from tests.helpers.data import (
    PYTORCH_PAGES,
    SGL_PAGES,
    recorded_pypi,
)

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PYPI = IndexSpec(name="pypi", url="https://pypi.org/simple")
SGL = IndexSpec(name="sgl-cu130", url=str(SGL_PAGES / "cu130"))
NIGHTLY = IndexSpec(name="nightly",
                    url=str(PYTORCH_PAGES / "whl" / "nightly" / "cu126"))


CASES = [
    (PYPI, "torch", Target(python="3.12"), None),
    (PYPI, "torch", Target(python="3.9"), None),
    (PYPI, "sglang", Target(python="3.12"), None),
    (PYPI, "urllib3", Target(python="3.12"), None),
    (PYPI, "urllib3", Target(python="3.8"), datetime(2023, 6, 1, tzinfo=UTC)),
    (PYPI, "flashinfer-python", Target(python="3.12"), None),
    (PYPI, "packaging", Target(python="3.12"), None),
    (SGL, "sgl-kernel", Target(python="3.12"), None),
    (NIGHTLY, "torch", Target(python="3.9"), None),
]


@pytest.mark.parametrize(("index", "project", "target", "cutoff"), CASES,
                         ids=lambda v: getattr(v, "name", None) or str(v))
def test_lazy_versions_equal_every_file_judged(make_client, index, project, target,
                                               cutoff):
    def finder() -> Finder:
        client = make_client(recorded_pypi, cache_dir=None)
        return Finder(client, [index], target, exclude_newer=cutoff)

    eager: dict[object, list[object]] = defaultdict(list)
    for ev in finder().find_candidates(project):
        eager[ev.version].append(ev)
    groups = finder().version_groups(project)
    lazy = {g.version: list(g.judge()) for g in groups if g.judge()}
    assert eager, "the recorded page has versions that fit"
    assert lazy == dict(eager)
    versions = [g.version for g in groups]
    assert versions == sorted(versions, reverse=True)


def test_nothing_is_judged_before_a_version_is_asked(make_client):
    finder = Finder(make_client(recorded_pypi, cache_dir=None), [PYPI],
                    Target(python="3.12"))
    judged: list[str] = []
    evaluate = finder._evaluator.evaluate

    def counting(link, **kwargs):
        judged.append(link.filename)
        return evaluate(link, **kwargs)

    finder._evaluator.evaluate = counting  # type: ignore[method-assign]
    groups = finder.version_groups("torch")
    assert len(groups) > 10 and judged == []
    newest = groups[0].judge()
    assert newest and judged
    assert all(f.split("-")[1] == str(groups[0].version) for f in judged)
    seen = len(judged)
    assert groups[0].judge() == newest and len(judged) == seen  # judged once
