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


def _profile(tmp_path: Path, packages: list[str], *, overrides: list[str] = ()
             ) -> Path:
    path = tmp_path / "choices.toml"
    path.write_text(
        f'[[index]]\nname = "here"\nurl = "{CHOICES}"\nkind = "flat"\n'
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
