"""A cache filled by one resolve over a recorded cassette, so that the CLI can
resolve the same profile with ``--offline``."""

from __future__ import annotations

from pathlib import Path

from stacklock.errors import ResolutionError
from stacklock.http import make_http_client
from stacklock.profile import load_profile
from stacklock.resolve.resolution import resolve_profile
from tests.helpers.cassette import ReplayTransport
from tests.helpers.data import DATA

RESOLVE = DATA / "resolve"
CASES = RESOLVE / "cases"


def fill_cache(profile: str, cache: Path) -> None:
    """Resolve ``profile`` (a case in tests/data/resolve/cases, else a built-in
    profile) once over its cassette, which leaves the pages and METADATA in
    ``cache``; a conflict is fine (its pages are what a retry reads)."""
    case = CASES / f"{profile}.toml"
    loaded = load_profile(str(case) if case.exists() else profile)
    transport = ReplayTransport(RESOLVE / "cassettes" / loaded.name)
    with make_http_client(transport=transport) as http:
        try:
            resolve_profile(loaded, http=http, cache_dir=cache)
        except ResolutionError:
            pass
