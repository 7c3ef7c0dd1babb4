"""What the resolver chooses, asserted: on a find-links folder of real wheels
(several versions of six and iniconfig, python-dateutil that requires six>=1.5;
tests/data/resolve/choices, recorded by scripts/record_choices.py), read with
no request, so a different choice fails an assertion here rather than a
recorded replay that has no answer for the request it leads to."""

from __future__ import annotations

import tomllib
from pathlib import Path

from stacklock.resolve.locking import lock_profile
from tests.helpers.data import DATA

CHOICES = DATA / "resolve" / "choices"


def _profile(tmp_path: Path, packages: list[str], *, overrides: list[str] = (),
             folder: Path = CHOICES) -> Path:
    path = tmp_path / "choices.toml"
    path.write_text(
        f'[[index]]\nname = "here"\nurl = "{folder}"\nkind = "flat"\n'
        f"[requirements]\npackages = {packages!r}\noverrides = {list(overrides)!r}\n"
        .replace("'", '"'))
    return path


def _versions(lock: Path) -> dict[str, str]:
    return {p["name"]: p["version"]
            for p in tomllib.loads(lock.read_text("utf-8"))["packages"]}


def _resolve(tmp_path: Path, profile: Path, **options: object) -> dict[str, str]:
    out = tmp_path / "pylock.choices.toml"
    lock_profile(str(profile), output=out, cache_dir=tmp_path / "cache",
                 check=False, **options)  # type: ignore[arg-type]
    return _versions(out)


def test_the_newest_version_each_requirement_allows(tmp_path: Path) -> None:
    profile = _profile(tmp_path, ["python-dateutil", "iniconfig<2.1"])
    assert _resolve(tmp_path, profile) == {
        "python-dateutil": "2.9.0.post0",
        "six": "1.17.0",         # dateutil asks six>=1.5: the newest of three
        "iniconfig": "2.0.0"}    # the newest below the profile's bound


def test_an_override_replaces_the_dependency_s_requirement(tmp_path: Path) -> None:
    profile = _profile(tmp_path, ["python-dateutil"], overrides=["six==1.15.0"])
    assert _resolve(tmp_path, profile)["six"] == "1.15.0"


def test_the_lock_s_pins_are_kept_until_released(tmp_path: Path) -> None:
    """A lock at the output path pins six 1.16.0: resolving again keeps it
    while the profile allows it; --upgrade-package six releases it."""
    profile = _profile(tmp_path, ["python-dateutil"], overrides=["six==1.16.0"])
    assert _resolve(tmp_path, profile)["six"] == "1.16.0"
    freed = _profile(tmp_path, ["python-dateutil"])
    assert _resolve(tmp_path, freed)["six"] == "1.16.0"  # kept: still allowed
    assert _resolve(tmp_path, freed, upgrade_packages=["six"])["six"] == "1.17.0"


def test_a_pin_goes_first_and_every_other_version_stays_in_order() -> None:
    """The lock's version is tried first; when it will not do, the resolver
    goes on with all the others, newest first (none dropped)."""
    import httpx
    from packaging.version import Version

    from stacklock.index.client import IndexClient
    from stacklock.index.finder import Finder
    from stacklock.profile import IndexSpec
    from stacklock.resolve.preferences import locked_first
    from stacklock.resolve.source import candidates_of
    from stacklock.target import Target

    index = IndexSpec(name="here", url=str(CHOICES), kind="flat")
    with httpx.Client() as http:
        finder = Finder(IndexClient(http), [index], Target())
        found = candidates_of(finder, "six")
    versions = [str(c.version) for c in found]
    assert versions == ["1.17.0", "1.16.0", "1.15.0"]
    assert [str(c.version) for c in locked_first(found, Version("1.16.0"))] == [
        "1.16.0", "1.17.0", "1.15.0"]
    assert locked_first(found, Version("1.17.0")) == found
    assert locked_first(found, Version("9.9")) == found


def test_a_project_of_pre_releases_only_gets_its_newest(tmp_path: Path) -> None:
    """As pip and uv do: where a project has nothing but pre-releases, its newest
    is taken unasked; once a final release exists, the final one is."""
    from tests.helpers.wheelkit import build_wheel

    folder = tmp_path / "wheels"
    for version in ("0.9b1", "1.0rc1"):
        build_wheel(folder, "early", version, {"early/__init__.py": b""})
    profile = _profile(tmp_path, ["early"], folder=folder)
    assert _resolve(tmp_path, profile) == {"early": "1.0rc1"}
    build_wheel(folder, "early", "0.8", {"early/__init__.py": b""})
    (tmp_path / "pylock.choices.toml").unlink()
    assert _resolve(tmp_path, profile) == {"early": "0.8"}
