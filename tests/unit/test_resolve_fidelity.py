"""Never silently wrong: yanked pins (PEP 592) and overrides/constraints with
markers, over recorded real PyPI traffic (tests/data/resolve/cassettes/)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from stacklock.errors import ResolutionError
from stacklock.http import make_http_client
from stacklock.lock import load_lock
from stacklock.resolve.locking import lock_profile, render_resolve
from tests.helpers.cassette import Layered, ReplayTransport

DATA = Path(__file__).resolve().parents[1] / "data" / "resolve"
CASES = DATA / "cases"
CASSETTES = DATA / "cassettes"


def _lock(case: str, tmp_path: Path, *cassettes: str):
    transport = ReplayTransport(CASSETTES / cassettes[0])
    for more in cassettes[1:]:
        transport = Layered(transport, ReplayTransport(CASSETTES / more))
    out = tmp_path / f"pylock.{case}.toml"
    with make_http_client(transport=transport) as http:
        result = lock_profile(str(CASES / f"{case}.toml"), output=out, http=http,
                              cache_dir=tmp_path / "cache", check=False)
    return result, out


def test_an_exact_pin_on_a_yanked_release_uses_it_and_warns(tmp_path):
    result, out = _lock("yanked-pin", tmp_path, "override", "yanked-pin")
    assert result.resolution.pins()["requests"] == "2.32.0"
    reason = "Yanked due to conflicts with CVE-2024-35195 mitigation"
    assert (f"warning: requests 2.32.0 is yanked ({reason}); used because the "
            "profile pins requests==2.32.0") in render_resolve(result)
    lock = load_lock(out)
    requests = lock.package("requests")
    assert requests is not None and requests.tool.yanked == reason
    assert requests.wheels[0].name == "requests-2.32.0-py3-none-any.whl"
    Pylock.from_dict(tomllib.loads(out.read_text()))


def test_a_range_only_a_yanked_release_fits_is_refused_saying_yanked(tmp_path):
    with pytest.raises(ResolutionError) as err:
        _lock("yanked-range", tmp_path, "override")
    text = str(err.value)
    assert "yanked: 2.32.0 (Yanked due to conflicts with CVE-2024-35195 " \
           "mitigation), used only when the profile pins one with == or ===" in text
    assert not (tmp_path / "pylock.yanked-range.toml").exists()


def test_overrides_and_constraints_with_markers_are_evaluated_and_all_recorded(
        tmp_path):
    result, out = _lock("override-marker", tmp_path, "override", "override-marker")
    pins = result.resolution.pins()
    # the win32 override of urllib3 is not in force on Linux: requests' own
    # urllib3<3,>=1.21.1 decides, and the newest 2.x is taken
    assert pins["urllib3"].startswith("2.")
    stack = tomllib.loads(out.read_text())["tool"]["stacklock"]
    assert stack["overrides"] == ["urllib3==1.26.20; sys_platform == \"win32\"",
                                  "idna>=3.0; sys_platform == \"linux\""]
    assert stack["overrides-ignored"] == ["urllib3==1.26.20; sys_platform == "
                                          "\"win32\""]
    assert stack["overrides-applied"] == [
        {"package": "requests", "original": "idna<4,>=2.5", "override": "idna>=3.0"}]
    assert stack["constraints-ignored"] == ["certifi<2020; sys_platform == \"win32\""]
    assert len(stack["constraints"]) == 2
    lock = load_lock(out)
    assert [str(r) for r in lock.overrides] == ['idna>=3.0; sys_platform == "linux"']
    assert lock.stack is not None
    assert [str(r) for r in lock.stack.constraints_ignored] == [
        'certifi<2020; sys_platform == "win32"']


def test_an_extra_the_project_does_not_have_is_named_in_a_warning(tmp_path):
    result, _ = _lock("unknown-extra", tmp_path, "override", "unknown-extra")
    assert result.resolution.warnings == (
        "requests 2.32.3 has no extra 'nonexistent'; it adds nothing to the lock",)
    assert "  warning: requests 2.32.3 has no extra 'nonexistent'" in render_resolve(
        result)
