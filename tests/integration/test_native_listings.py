"""The native check inside a resolve lists a wheel's members from the central
directory the METADATA read already held, instead of asking again: real wheels
(markupsafe with its extension module; six, idna and iniconfig, pure) and one
built wheel whose directory is too large for the tail, on a loopback simple
index that honours every kind of Range. Requests are counted at the server."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from stacklock.resolve.locking import lock_profile
from tests.helpers.data import DATA
from tests.helpers.loopback import loopback
from tests.helpers.native_facts import MARKUPSAFE
from tests.helpers.ranges import answer_range
from tests.helpers.wheelkit import build_wheel

PURE = [DATA / "install" / "wheels" / name for name in (
    "six-1.17.0-py2.py3-none-any.whl", "idna-3.20-py3-none-any.whl",
    "iniconfig-2.3.1-py3-none-any.whl")]
EXTENSION = "_speedups.cpython-312-x86_64-linux-gnu.so"


def _big_directory_wheel(folder: Path) -> Path:
    """A ``py3-none-any`` wheel carrying markupsafe's real extension module among
    1,500 other members: its central directory (about 160 KB) is larger than the
    64 KiB tail the METADATA read takes. It also ships the same object as a
    library other wheels could link (``lib/libbigdir.so``), as :func:`_linker_wheel`
    does, so the check reads every wheel with shared objects
    (``check.link_plan``)."""
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        extension = archive.read(f"markupsafe/{EXTENSION}")
    files = {f"bigdir/module_{i:04d}_with_a_long_name_to_fill_the_directory.py":
             b"x = 1\n" for i in range(1500)}
    files[f"bigdir/{EXTENSION}"] = extension
    files["bigdir/lib/libbigdir.so"] = extension
    return build_wheel(folder, "bigdir", "1.0", files)


def _linker_wheel(folder: Path) -> Path:
    """A small ``py3-none-any`` wheel shipping a library other wheels could
    link (markupsafe's extension module under a library's name): beside it,
    bigdir's objects may name one, so they are read."""
    with zipfile.ZipFile(MARKUPSAFE) as archive:
        extension = archive.read(f"markupsafe/{EXTENSION}")
    return build_wheel(folder, "linker", "1.0", {"linker/lib/liblinker.so": extension})


class _Index:
    """A PEP 503 index of ``wheels`` (sha256 on every anchor, no PEP 658 file,
    so METADATA comes by range reads); ``asked`` holds (path, Range) per GET."""

    def __init__(self, wheels: list[Path]) -> None:
        self.files: dict[str, bytes] = {}
        self.asked: list[tuple[str, str | None]] = []
        pages: dict[str, list[str]] = {}
        for wheel in wheels:
            body = wheel.read_bytes()
            self.files[f"/files/{wheel.name}"] = body
            project = wheel.name.split("-")[0].lower()
            pages.setdefault(project, []).append(
                f'<a href="/files/{wheel.name}#sha256='
                f'{hashlib.sha256(body).hexdigest()}">{wheel.name}</a>')
        for project, anchors in pages.items():
            self.files[f"/simple/{project}/"] = (
                "<!DOCTYPE html><html><body>\n" + "\n".join(anchors)
                + "\n</body></html>\n").encode()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                asked = self.headers.get("range")
                index.asked.append((path, asked))
                body = index.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                if path.endswith(".whl"):
                    status, headers, content = answer_range(body, "GET", asked)
                else:
                    status, headers, content = 200, [
                        ("content-type", "text/html"),
                        ("content-length", str(len(body)))], body
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(content)

        return Handler

    def wheel_requests(self) -> Counter[str]:
        """Requests per wheel filename since the last call."""
        counted = Counter(path.rsplit("/", 1)[-1] for path, _ in self.asked
                          if path.endswith(".whl"))
        self.asked.clear()
        return counted


def _profile(path: Path, base: str, packages: list[str]) -> Path:
    path.write_text(
        '[target]\npython = "3.12"\nplatform = "linux_x86_64"\nmanylinux = "2_28"\n'
        f'[[index]]\nname = "here"\nurl = "{base}/simple"\n'
        f'[requirements]\npackages = {json.dumps(packages)}\n')
    return path


@contextmanager
def served(tmp_path: Path) -> Iterator[_Index]:
    """The index of markupsafe, the pure wheels, bigdir and linker, served;
    its ``profile`` asks for all six."""
    made = _Index([MARKUPSAFE, *PURE, _big_directory_wheel(tmp_path / "built"),
                   _linker_wheel(tmp_path / "built")])
    with loopback(made.handler()) as base:
        made.profile = _profile(  # type: ignore[attr-defined]
            tmp_path / "listings.toml", base,
            ["markupsafe", "six", "idna", "iniconfig", "bigdir", "linker"])
        yield made


@pytest.fixture
def index(tmp_path):
    with served(tmp_path) as made:
        yield made


def _facts(cache: Path) -> dict[str, object]:
    return {entry.name: json.loads(gzip.decompress(entry.read_bytes()))
            for entry in (cache / "native").glob("*.json.gz")}


def _verdict(report: object) -> dict[str, object]:
    out = dict(report.to_dict())  # type: ignore[attr-defined]
    for counted in ("bytes_read", "bytes_by_wheel", "requests", "seconds"):
        out.pop(counted)
    return out


def test_the_check_asks_nothing_the_metadata_read_already_held(tmp_path, index):
    profile = str(index.profile)
    # --no-check, cold: what the METADATA reads alone ask of each wheel
    lock_profile(profile, output=tmp_path / "plain.toml", check=False,
                 cache_dir=tmp_path / "plain")
    metadata_only = index.wheel_requests()
    # the default resolve, cold: METADATA reads, then the check
    new = lock_profile(profile, output=tmp_path / "new.toml",
                       cache_dir=tmp_path / "new")
    both = index.wheel_requests()
    # as before: METADATA from the cache, so no directory is held and the
    # check reads every wheel's tail itself
    shutil.copytree(tmp_path / "plain" / "metadata", tmp_path / "old" / "metadata")
    old = lock_profile(profile, output=tmp_path / "old.toml",
                       cache_dir=tmp_path / "old")
    check_alone = index.wheel_requests()

    by_check = {name: both[name] - metadata_only[name] for name in both}
    for pure in PURE:
        assert check_alone[pure.name] == 1  # today: the tail, to list members
        assert by_check[pure.name] == 0  # now: no request at all
    assert check_alone[MARKUPSAFE.name] >= 2  # the tail, then the member
    assert by_check[MARKUPSAFE.name] == check_alone[MARKUPSAFE.name] - 1
    # the big directory did not fit the tail: the check reads it as before
    assert by_check["bigdir-1.0-py3-none-any.whl"] == \
        check_alone["bigdir-1.0-py3-none-any.whl"] >= 2
    assert new.native is not None and old.native is not None
    assert new.native.requests == sum(by_check.values())
    assert old.native.requests == sum(check_alone.values())
    # the same lock, the same verdict, the same facts of every wheel
    assert new.text == old.text
    assert _verdict(new.native) == _verdict(old.native)
    assert new.native.seconds > 0 and old.native.seconds > 0  # timed, reported
    assert new.native.objects == old.native.objects == 4
    assert _facts(tmp_path / "new") == _facts(tmp_path / "old")
    assert len(_facts(tmp_path / "new")) == 6


def test_a_wheel_no_finding_can_join_to_another_is_listed_not_read(tmp_path):
    """markupsafe's extension module beside pure wheels: no wheel ships a
    library another could link, so no finding can join two wheels; its
    members are not read (only the directory the METADATA read held)."""
    made = _Index([MARKUPSAFE, *PURE])
    with loopback(made.handler()) as base:
        profile = _profile(tmp_path / "alone.toml", base, ["markupsafe", "six"])
        lock_profile(str(profile), output=tmp_path / "plain.toml", check=False,
                     cache_dir=tmp_path / "plain")
        metadata_only = made.wheel_requests()
        result = lock_profile(str(profile), output=tmp_path / "lock.toml",
                              cache_dir=tmp_path / "cache")
        both = made.wheel_requests()
    assert result.native is not None and result.native.ok
    assert result.native.unlinked == 1
    assert result.native.objects == 0
    assert result.native.requests == 0
    assert both == metadata_only
    # the facts of a wheel not read are not cached as if read
    cached = _facts(tmp_path / "cache")
    assert all(not entry["files"] for entry in cached.values())
