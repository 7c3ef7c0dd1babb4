"""Index pinning, local versions and hash settling on a local mirror.

The mirror is the loopback server of tests/conftest.py serving the real recorded
pages: the sgl-kernel cu130 index (tests/data/real/sgl-project-whl-gh-pages/) and
the PyTorch nightly page built from real anchor lines (tests/data/pytorch/). PyPI's
pages are the index author's real recordings (tests/data/pypi/). The wheel hosts
(github.com release assets) cannot be recorded here, so they serve a *stand-in*:
a small zip labelled as such, whose METADATA is PyPI's sgl-kernel 0.3.21 METADATA
with its Version line set to the local version (tests/data/resolve/PROVENANCE.md).
Its sha256 is none of the hashes the real page lists, which is the point of the
rejection test.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import httpx
import pytest
from packaging.version import Version

from stacklock.errors import HashMismatchError
from stacklock.index.client import IndexClient
from stacklock.index.finder import Finder
from stacklock.lock import load_lock
from stacklock.metadata import MetadataFetcher
from stacklock.profile import PYPI_URL, IndexSpec, load_profile
from stacklock.resolve.hashes import known_wheel, settle_wheel
from stacklock.resolve.locking import lock_profile
from stacklock.resolve.preferences import LockedPin
from stacklock.resolve.provider import StackProvider
from stacklock.resolve.rules import Rules
from stacklock.resolve.source import PackageSource
from stacklock.store import ArtifactStore
from stacklock.target import Target
from tests.helpers.data import DATA, read_fixture
from tests.helpers.mirror import derived_index
from tests.helpers.ranges import range_response
from tests.helpers.standins import SGL_FILE, stand_in_wheel


class Hosts:
    """PyPI pages from tests/data/pypi, wheel hosts serving the stand-in; the
    loopback mirror goes through a real HTTP transport."""

    def __init__(self) -> None:
        self.wheel = stand_in_wheel()
        self.wheel_gets = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "pypi.org":
            project = request.url.path.strip("/").split("/")[-1]
            body = read_fixture(DATA / "pypi" / f"{project}.json")
            return httpx.Response(200, content=body, headers={
                "content-type": "application/vnd.pypi.simple.v1+json"})
        if request.url.host == "github.com":
            if request.method == "GET" and "range" not in request.headers:
                self.wheel_gets += 1
            return range_response(request, self.wheel)
        return httpx.Response(404)

    def client(self) -> httpx.Client:
        return httpx.Client(mounts={"http://127.0.0.1": httpx.HTTPTransport(),
                                    "all://": httpx.MockTransport(self)},
                            follow_redirects=True, trust_env=False)


def _provider(http, tmp_path, indexes, target, prereleases=frozenset()):
    client = IndexClient(http, cache_dir=tmp_path / "cache")
    finder = Finder(client, indexes, target)
    env = target.marker_environment()
    rules = Rules(environment=env, prereleases=prereleases)
    fetcher = MetadataFetcher(http, cache_dir=tmp_path / "cache")
    source = PackageSource(finder, fetcher, environment=env, workers=0)
    return StackProvider(source, rules), finder


def _matches(provider, text):
    from packaging.requirements import Requirement as PepRequirement

    req = provider.rules.make(PepRequirement(text), parent=None)
    # find_matches answers with a factory: resolvelib judges versions lazily
    return list(provider.find_matches(req.identifier, {req.identifier: iter([req])},
                                      {req.identifier: iter(())})())


def test_pinned_index_wins_over_a_higher_torch_on_pypi(local_index, tmp_path):
    hosts = Hosts()
    nightly = IndexSpec(name="pytorch-nightly-cu126",
                        url=f"{local_index}/pytorch/whl/nightly/cu126",
                        packages=("torch",))
    pypi = IndexSpec(name="pypi", url=PYPI_URL)
    target = Target(python="3.9")  # the recorded nightly anchors are cp39/cp313
    with hosts.client() as http:
        provider, _ = _provider(http, tmp_path, [nightly, pypi], target,
                                prereleases=frozenset({"torch"}))
        _, pypi_only = _provider(http, tmp_path / "p", [pypi], target)
        on_pypi = max(e.version for e in pypi_only.find_candidates("torch"))
        found = _matches(provider, "torch>=2.0")
    assert on_pypi > Version("2.6.0")  # PyPI has higher torch for cp39 ...
    assert found, "the pinned index has a cp39 manylinux wheel"
    # ... yet only the pinned index's nightly is a candidate
    assert {str(c.version) for c in found} == {"2.6.0.dev20250102+cu126"}
    assert {c.index for c in found} == {"pytorch-nightly-cu126"}


def test_public_pin_matches_a_local_version_from_the_pinned_index(local_index,
                                                                  tmp_path):
    hosts = Hosts()
    sgl = IndexSpec(name="sgl-kernel-cu130",
                    url=f"{local_index}/real/sgl-project-whl-gh-pages/cu130",
                    packages=("sgl-kernel",))
    pypi = IndexSpec(name="pypi", url=PYPI_URL)
    with hosts.client() as http:
        provider, _ = _provider(http, tmp_path, [sgl, pypi], Target())
        pinned = _matches(provider, "sgl-kernel==0.3.21")
        exact = _matches(provider, "sgl-kernel==0.3.21+cu130")
        older = _matches(provider, "sgl-kernel==0.3.20")
    assert [str(c.version) for c in pinned] == ["0.3.21+cu130"]
    assert pinned[0].best.link.filename == SGL_FILE  # cp312-abi3 beats cp310-abi3
    assert [str(c.version) for c in exact] == ["0.3.21+cu130"]
    assert [str(c.version) for c in older] == ["0.3.20+cu130"]


def _sgl_candidate(http, tmp_path, index_url):
    sgl = IndexSpec(name="sgl-kernel-cu130", url=index_url, packages=("sgl-kernel",))
    provider, _ = _provider(http, tmp_path, [sgl], Target())
    (cand,) = _matches(provider, "sgl-kernel==0.3.21")
    return cand


def test_stand_in_matching_none_of_the_listed_hashes_is_rejected(local_index,
                                                                  tmp_path):
    hosts = Hosts()
    with hosts.client() as http:
        cand = _sgl_candidate(http, tmp_path,
                              f"{local_index}/real/sgl-project-whl-gh-pages/cu130")
        listed = {e.link.sha256 for e in cand.evaluations
                  if e.link.filename == SGL_FILE}
        assert len(listed) > 1  # the real page lists this file under several hashes
        with pytest.raises(HashMismatchError) as err:
            settle_wheel(cand, store=ArtifactStore(tmp_path / "art"), http=http)
    for sha in listed:
        assert sha in str(err.value)
    assert err.value.actual == hashlib.sha256(hosts.wheel).hexdigest()


def test_listed_stand_in_hash_is_settled_by_one_download(tmp_path):
    hosts = Hosts()
    sha = hashlib.sha256(hosts.wheel).hexdigest()
    with hosts.client() as http:
        cand = _sgl_candidate(http, tmp_path, derived_index(tmp_path, sha))
        store = ArtifactStore(tmp_path / "art")
        seen: list[int] = []
        first = settle_wheel(cand, store=store, http=http,
                             progress=lambda name, done, total: seen.append(done))
        again = settle_wheel(cand, store=store, http=http)
    assert first.sha256 == again.sha256 == sha
    assert first.hash_source == "download"
    assert hosts.wheel_gets == 1  # never downloaded twice
    assert seen and seen[-1] == len(hosts.wheel)
    assert store.path_for(sha) is not None  # install reuses these bytes
    # the lock's record of that file (one of the index's hashes) is kept as it
    # is, with no download at all; a record of another version is not
    pin = LockedPin(version=cand.version, filename=SGL_FILE, sha256=sha,
                    hash_source="download")
    assert known_wheel(cand, pin) == first
    assert known_wheel(cand, replace(pin, version=Version("0.3.20"))) is None


def test_profile_with_pinned_sgl_index_locks_through_the_mirror(tmp_path):
    hosts = Hosts()
    sha = hashlib.sha256(hosts.wheel).hexdigest()
    profile_path = tmp_path / "sgl-mirror.toml"
    profile_path.write_text(
        "[profile]\ndescription = \"sgl-kernel from its pinned index\"\n"
        f"[[index]]\nname = \"sgl-kernel-cu130\"\nurl = \"{tmp_path / 'derived'}\"\n"
        "packages = [\"sgl-kernel\"]\n[[index]]\nname = \"pypi\"\n"
        "[requirements]\npackages = [\"sgl-kernel==0.3.21\"]\n")
    derived_index(tmp_path, sha)
    out = tmp_path / "pylock.sgl-mirror.toml"
    with hosts.client() as http:
        result = lock_profile(str(profile_path), output=out, http=http,
                              cache_dir=tmp_path / "cache")
    lock = load_lock(out)
    (pkg,) = lock.packages
    assert (pkg.name, str(pkg.version), pkg.tool.index_name) == (
        "sgl-kernel", "0.3.21+cu130", "sgl-kernel-cu130")
    assert pkg.wheels[0].hashes["sha256"] == sha
    assert pkg.tool.hash_source == "download"
    assert pkg.cuda == "13.0"
    assert result.to_dict()["packages"] == 1
    assert replace(load_profile(str(profile_path))).indexes[0].packages == (
        "sgl-kernel",)


def test_blackwell_cu130_takes_sgl_kernel_from_its_pinned_index(local_index,
                                                                tmp_path):
    """The built-in profile, its sgl-kernel index pointed at the loopback mirror
    of the real page (as ``--index sgl-kernel-cu130=URL`` does)."""
    profile = load_profile("blackwell-cu130").with_index_urls({
        "sgl-kernel-cu130": f"{local_index}/real/sgl-project-whl-gh-pages/cu130",
        "pytorch-cu130": f"{local_index}/pytorch/whl/nightly/cu126"})
    (wanted,) = [str(r) for r in profile.requirements.packages
                 if r.name == "sgl-kernel"]
    hosts = Hosts()
    with hosts.client() as http:
        provider, finder = _provider(http, tmp_path, profile.indexes, profile.target)
        found = _matches(provider, wanted)
        assert finder.index_for("sgl-kernel").name == "sgl-kernel-cu130"
    assert [(str(c.version), c.index) for c in found] == [
        ("0.3.21+cu130", "sgl-kernel-cu130")]
    assert found[0].cuda == "13.0"
