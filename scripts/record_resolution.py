"""Record the PyPI traffic of real resolutions, for hermetic resolver tests.

Each case is a profile (a built-in name or a path); it is resolved against the real
indexes with an empty cache, through ``tests/cassette.py``'s RecordingTransport, so
the cassette holds every page and METADATA range read that resolution made. Tests
replay it with ReplayTransport and get the same answer offline.

    .venv/bin/python scripts/record_resolution.py pypi-small \
        tests/data/resolve/cases/conflict.toml

Writes ``tests/data/resolve/cassettes/<profile name>/`` and appends a line to
``tests/data/resolve/cassettes/PROVENANCE.md``.

``--metadata`` records the pages only and keeps the METADATA files the
resolution read, as the metadata cache held them after it (``metadata.json.gz``:
cache key -> the file's text), without prefetching: a resolution that reads
a hundred METADATA files takes 64 KiB of wheel tail for each, and the test
starts from a cache that holds them instead.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklock.errors import ResolutionError, StacklockError  # noqa: E402
from stacklock.http import make_http_client  # noqa: E402
from stacklock.profile import load_profile  # noqa: E402
from stacklock.resolve.locking import NativeGate  # noqa: E402
from stacklock.resolve.resolution import resolve_profile  # noqa: E402
from tests.helpers.cassette import (  # noqa: E402
    CassetteMiss,
    RecordingTransport,
    ReplayTransport,
)

OUT = ROOT / "tests" / "data" / "resolve" / "cassettes"


class PagesOnly(httpx.BaseTransport):
    """Record index pages; send wheel reads on without recording them."""

    def __init__(self, pages: RecordingTransport) -> None:
        self.pages, self.rest = pages, httpx.HTTPTransport(retries=2)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith((".whl", ".metadata")):
            return self.rest.handle_request(request)
        return self.pages.handle_request(request)


def keep_metadata(cache: Path, folder: Path, base: Path | None = None) -> None:
    """The METADATA files of the cache, as ``folder/metadata.json.gz``, less
    those ``base``'s metadata.json.gz holds (tests seed both)."""
    files = {p.name.removesuffix(".metadata"): p.read_text("utf-8")
             for p in sorted((cache / "metadata").glob("*.metadata"))}
    held = base / "metadata.json.gz" if base is not None else None
    if held is not None and held.exists():
        for key in json.loads(gzip.decompress(held.read_bytes())):
            files.pop(key, None)
    folder.mkdir(parents=True, exist_ok=True)  # the base may hold every page
    (folder / "metadata.json.gz").write_bytes(gzip.compress(
        json.dumps(files, sort_keys=True).encode(), mtime=0))


class Layered(httpx.BaseTransport):
    """Answer from an existing cassette; record only what it lacks."""

    def __init__(self, base: ReplayTransport, rest: httpx.BaseTransport) -> None:
        self.base, self.rest = base, rest

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return self.base.handle_request(request)
        except CassetteMiss:
            return self.rest.handle_request(request)


def record(profile_arg: str, base: str | None = None, check: bool = False,
           metadata: bool = False) -> str:
    profile = load_profile(profile_arg)
    folder = OUT / profile.name
    transport = RecordingTransport(folder, httpx.HTTPTransport(retries=2))
    outer: httpx.BaseTransport = PagesOnly(transport) if metadata else transport
    if base is not None:  # pages only still, with --metadata
        outer = Layered(ReplayTransport(OUT / base), outer)
    http = make_http_client(transport=outer)
    with tempfile.TemporaryDirectory(prefix="record-resolution-") as cache, \
            make_http_client() as plain:
        # the native check reads wheels through its own client and the user's
        # cache: the cassette holds what the resolver read, not gigabytes of wheels
        gate = NativeGate(profile, http=plain, offline=False,
                          cache_dir=None) if check else None
        try:
            result = resolve_profile(profile, http=http, cache_dir=Path(cache),
                                     workers=8, gate=gate, prefetch=not metadata)
            outcome = f"{len(result.packages)} packages"
        except ResolutionError:
            outcome = "no resolution (a conflict case)"
        except StacklockError as exc:
            outcome = f"{type(exc).__name__} (an error case)"
        finally:
            http.close()
        if metadata:
            keep_metadata(Path(cache), folder, OUT / base if base else None)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")
    line = (f"- `{profile.name}/`: {when}, `scripts/record_resolution.py "
            f"{profile_arg}{f' --base {base}' if base else ''}"
            f"{' --check' if check else ''}{' --metadata' if metadata else ''}` "
            "against "
            "https://pypi.org/simple and "
            f"files.pythonhosted.org; {len(transport.entries)} responses, "
            f"{size // 1024} KiB; outcome: {outcome}\n")
    with (OUT / "PROVENANCE.md").open("a", encoding="utf-8") as fh:
        fh.write(line)
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profiles", nargs="+")
    parser.add_argument("--base", metavar="CASSETTE",
                        help="replay this cassette first and record only the "
                        "requests it does not hold (tests layer the two)")
    parser.add_argument("--check", action="store_true",
                        help="resolve with the native check, so the cassette also "
                        "holds what resolving again without a passed-over "
                        "candidate reads")
    parser.add_argument("--metadata", action="store_true",
                        help="record the pages only and keep the METADATA files "
                        "read, as metadata.json.gz (no prefetching)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    prov = OUT / "PROVENANCE.md"
    if not prov.exists():
        prov.write_text(
            "# Recorded resolutions\n\nReal responses of https://pypi.org/simple "
            "(PEP 691 JSON pages) and files.pythonhosted.org (METADATA range reads),"
            " recorded by `scripts/record_resolution.py` through "
            "`tests/cassette.py`; bodies over 32 KiB are gzip-compressed, nothing "
            "else is changed.\n\n", encoding="utf-8")
    for name in args.profiles:
        sys.stdout.write(record(name, args.base, args.check, args.metadata))
    return 0


if __name__ == "__main__":
    sys.exit(main())
