"""A large library is read only when an extension of another wheel needs a
symbol only it may give, and then once: two wheels built here with gcc (a
provider whose library is "large" for the test, a consumer built against
another build of it), served by range requests from their real bytes."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import httpx
import pytest

from stacklock.native import NativeWheel, WheelReader, check_native
from tests.helpers.ranges import range_response
from tests.helpers.wheelkit import build_wheel

TARGET = {"manylinux": "2_28", "platform": "linux_x86_64", "python": "3.12"}
FAMILY = "\n".join(f"int prov_f{i}(void) {{ return {i}; }}" for i in range(10))
EXTENSION = "cons/_ext.cpython-312-x86_64-linux-gnu.so"


def _gcc(out: Path, source: str, *flags: str) -> Path:
    assert shutil.which("gcc"), "gcc is needed to build the test objects"
    c = out.with_suffix(".c")
    c.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(c), *flags],
                   check=True, capture_output=True)
    return out


def _wheels(folder: Path, *, consumer_needs_gone: bool) -> list[Path]:
    """prov ships libprov.so exporting prov_present and the prov_f* family;
    cons's extension was linked against a libprov that also had prov_gone."""
    old = folder / "old" / "libprov.so"
    old.parent.mkdir(parents=True)
    _gcc(old, FAMILY + "\nint prov_present(void) { return 1; }\n"
         "int prov_gone(void) { return 2; }\n", "-Wl,-soname,libprov.so")
    present = "\nint prov_present(void) { return 1; }\n"
    new = _gcc(folder / "libprov.so", FAMILY + present, "-Wl,-soname,libprov.so")
    calls = "prov_present() + prov_gone()" if consumer_needs_gone else "prov_present()"
    ext = _gcc(folder / "ext.so",
               "int prov_present(void);\nint prov_gone(void);\n"
               f"int PyInit__ext(void) {{ return {calls}; }}\n",
               f"-L{old.parent}", "-lprov")
    tag = "cp312-cp312-manylinux_2_28_x86_64"
    return [build_wheel(folder / "wheels", "prov", "1.0",
                        {"prov/lib/libprov.so": new.read_bytes()}, tag=tag),
            build_wheel(folder / "wheels", "cons", "1.0",
                        {EXTENSION: ext.read_bytes()}, tag=tag)]


def _check(tmp_path: Path, wheels: list[Path]):
    bodies = {f"https://files.example.org/{w.name}": w.read_bytes() for w in wheels}
    asked: Counter[str] = Counter()

    def serve(request: httpx.Request) -> httpx.Response:
        asked[str(request.url).rsplit("/", 1)[-1]] += 1
        return range_response(request, bodies[str(request.url)])

    native = [NativeWheel(package=w.name.split("-")[0], version="1.0",
                          filename=w.name, url=url,
                          sha256=hashlib.sha256(body).hexdigest(), size=len(body))
              for w, (url, body) in zip(wheels, bodies.items(), strict=True)]
    http = httpx.Client(transport=httpx.MockTransport(serve))
    reader = WheelReader(http, cache_dir=tmp_path / "cache")
    return check_native(native, reader=reader, **TARGET), reader, asked


@pytest.mark.parametrize("needs_gone", [True, False])
def test_a_large_library_is_read_once_when_an_extension_needs_it(
        tmp_path, monkeypatch, needs_gone):
    monkeypatch.setattr("stacklock.native.wheel.LARGE_MEMBER", 0)
    wheels = _wheels(tmp_path, consumer_needs_gone=needs_gone)
    report, reader, first = _check(tmp_path, wheels)
    # the directory once, the library once (started early, not read again)
    assert first[wheels[0].name] == 2
    assert report.unread == ()  # libprov.so was asked for and read
    assert report.objects == 2
    if needs_gone:
        assert [(f.package, f.missing, f.counterpart) for f in report.findings] == \
            [("cons", "prov_gone", "prov 1.0")]
    else:
        assert report.ok
    # read once: the provider's facts, large member included, are cached whole
    again, _reader, asked = _check(tmp_path, wheels)
    assert again.findings == report.findings
    assert sum(asked.values()) == 0
    assert reader.bytes_by_wheel[wheels[0].name] > 0


def _loner(folder: Path) -> Path:
    """A wheel whose extension module links nothing of prov's."""
    ext = _gcc(folder / "loner.so", "int PyInit__loner(void) { return 7; }\n")
    return build_wheel(folder / "wheels", "loner", "1.0",
                       {"loner/_loner.cpython-312-x86_64-linux-gnu.so":
                        ext.read_bytes()}, tag="cp312-cp312-manylinux_2_28_x86_64")


def test_a_library_no_object_names_is_not_read(tmp_path):
    """prov is the only wheel with a library another could link: loner's
    objects are read to see whether they name it, prov's only once one does
    (cons's extension, built against it)."""
    prov, cons = _wheels(tmp_path / "built", consumer_needs_gone=True)
    loner = _loner(tmp_path / "built")
    report, reader, asked = _check(tmp_path / "alone", [prov, loner])
    assert report.ok and report.objects == 1 and report.unlinked == 1
    assert asked[prov.name] == 1  # its directory: nothing names its library
    assert asked[loner.name] >= 1 and reader.bytes_by_wheel[loner.name] > 0
    # with cons, which names libprov.so, prov is read and its symbol judged
    report, reader, asked = _check(tmp_path / "named", [prov, loner, cons])
    assert report.objects == 3 and report.unlinked == 0
    assert [(f.package, f.missing) for f in report.findings] == [("cons", "prov_gone")]
    assert asked[prov.name] == 2  # the directory, then the library
