"""The provider's remembered answers are the answers it would compute afresh.

resolvelib asks ``is_satisfied_by`` and ``get_preference`` again and again with
the same arguments; the provider remembers them (per requirement and version,
per set of requirement objects). These tests check that a remembered answer is
never a stale one: for every version of ``packaging`` on its recorded PyPI page,
and for requirements that share an identifier but not a specifier. The
resolutions in test_resolve.py check the whole, through resolvelib's public
``Resolver``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement as PepRequirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from stacklock.index.finder import Finder
from stacklock.metadata import MetadataFetcher
from stacklock.profile import IndexSpec
from stacklock.resolve.model import Candidate
from stacklock.resolve.provider import StackProvider
from stacklock.resolve.rules import Rules
from stacklock.resolve.source import PackageSource
from stacklock.target import Target
from tests.helpers.data import PYPI_PAGES, read_fixture

PYPI = IndexSpec(name="pypi", url="https://pypi.org/simple")
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PACKAGE = Path(__file__).resolve().parents[2] / "stacklock"


def _page(request: httpx.Request) -> httpx.Response:
    name = request.url.path.strip("/").split("/")[-1]
    return httpx.Response(200, headers={"content-type": JSON_TYPE},
                          content=read_fixture(PYPI_PAGES / f"{name}.json"))


@pytest.fixture
def provider(make_client, tmp_path):
    target = Target(python="3.12")
    env = target.marker_environment()
    finder = Finder(make_client(_page), [PYPI], target)
    with httpx.Client(transport=httpx.MockTransport(
            lambda _: httpx.Response(404))) as http:
        fetcher = MetadataFetcher(http, cache_dir=tmp_path / "meta")
        with PackageSource(finder, fetcher, environment=env, workers=2,
                           prefetch=False) as source:
            yield StackProvider(source, Rules(environment=env))


def _info(*reqs):
    """What resolvelib passes as ``information``: items with a ``requirement``."""
    return [type("Info", (), {"requirement": r, "parent": None})() for r in reqs]


def _parent(name: str) -> Candidate:
    return Candidate(name=canonicalize_name(name), version=Version("1.0"))


def _preference(provider: StackProvider, *reqs):
    ident = reqs[0].identifier
    return provider.get_preference(ident, {}, {}, {ident: iter(_info(*reqs))}, [])


@pytest.mark.parametrize("text", ["packaging>=20,<24", "packaging==23.2",
                                  "packaging!=22.0", "packaging~=21.0",
                                  "packaging<22.0rc1", "packaging"])
def test_is_satisfied_by_is_the_specifier_asked_twice(provider, text):
    req = provider.rules.make(PepRequirement(text), parent=None)
    spec = PepRequirement(text).specifier
    versions = [c.version for c in provider.source.candidates("packaging")]
    versions += [Version("22.0rc1"), Version("23.2+local")]
    assert len(versions) > 30
    for _ in range(2):  # the second round answers from what was remembered
        answers = [provider.is_satisfied_by(req, c) for c in
                   provider.source.candidates("packaging")]
        assert answers == [spec.contains(c.version, prereleases=True)
                           for c in provider.source.candidates("packaging")]
        assert all(req.is_satisfied_by(v) == spec.contains(v, prereleases=True)
                   for v in versions)


def test_preference_follows_the_requirements_not_the_identifier(provider):
    loose = provider.rules.make(PepRequirement("packaging>=20"), parent=None)
    pinned = provider.rules.make(PepRequirement("packaging==23.2"), parent=_parent("x"))
    first = _preference(provider, loose)
    assert _preference(provider, loose) == first  # remembered, the same
    both = _preference(provider, loose, pinned)
    assert both != first
    assert both[0] is False and first[0] is True  # pinned is decided first
    assert both[2] == 1 < first[2]  # one matching version against many
    # equal requirements made anew (as after a backtrack): the same answer
    again = provider.rules.make(PepRequirement("packaging>=20"), parent=None)
    assert again is not loose
    assert _preference(provider, again) == first
    # a transitive requirement ranks after a direct one of the same range
    child = provider.rules.make(PepRequirement("packaging>=20"), parent=_parent("y"))
    assert _preference(provider, child)[3] is True and first[3] is False


def test_no_module_imports_resolvelib_internals():
    """resolvelib's public API is ``resolvelib`` itself (Resolver,
    AbstractProvider, BaseReporter, its exceptions) and ``resolvelib.structs``
    for types; anything else may change in any release."""
    private = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [])
            private += [f"{path.relative_to(PACKAGE)}: {n}" for n in names
                        if n.startswith("resolvelib.")
                        and n != "resolvelib.structs"]
    assert private == []
