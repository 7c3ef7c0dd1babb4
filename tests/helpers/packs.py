"""Real packs for tests: written by the pack writer from the real recorded wheels in
tests/data/install/ and the stacklock wheel made from this checkout."""

from __future__ import annotations

import hashlib
from pathlib import Path

from stacklock.lock import load_lock, wheel_sha256
from stacklock.pack.tools import make_self_wheel
from stacklock.pack.writer import PackItem, _write
from tests.helpers.data import DATA

INSTALL = DATA / "install"
SMALL_LOCK = INSTALL / "pylock.small.toml"
HEAD = {"stacklock": "0.1.0", "python": "3.11", "platform": "linux_x86_64",
        "glibc": None, "toolkit": None}


def small_pack_items(*, drop: str | None = None
                     ) -> list[tuple[PackItem, Path | None]]:
    """The lock, one wheel per package (all but ``drop``'s), and stacklock."""
    lock = load_lock(SMALL_LOCK)
    raw = SMALL_LOCK.read_bytes()
    items: list[tuple[PackItem, Path | None]] = [(PackItem(
        path=f"lock/{SMALL_LOCK.name}", kind="lock", data=raw, size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest()), None)]
    for pkg in lock.packages:
        if pkg.name == drop:
            continue
        wheel = pkg.wheels[0]
        items.append((PackItem(path=f"wheels/{wheel.filename}", kind="wheel",
                               sha256=str(wheel_sha256(wheel)), size=wheel.size),
                      INSTALL / "wheels" / wheel.filename))
    name, data = make_self_wheel()
    items.append((PackItem(path=f"tools/{name}", kind="tool", data=data,
                           size=len(data), sha256=hashlib.sha256(data).hexdigest()),
                  None))
    return items


def uv_wheel_item() -> tuple[PackItem, None]:
    """uv's wheel as the bootstrap reads it (``uv-V.data/scripts/uv``), made from
    the uv this checkout runs: the real binary, in a wheel of its own name
    (uv's wheels come from PyPI, which the offline tests do not reach)."""
    import io
    import subprocess
    import zipfile

    from stacklock.pack.tools import zip_entry
    from stacklock.record import record_digest
    from stacklock.runner import find_uv

    uv = find_uv()
    version = subprocess.run([uv, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[1]
    dist = f"uv-{version}.dist-info"
    files = {f"uv-{version}.data/scripts/uv": Path(uv).read_bytes(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: uv\nVersion: "
                                 f"{version}\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\n"
                              b"Root-Is-Purelib: false\nTag: py3-none-any\n"}
    record = "".join(f"{name},{record_digest(body)},{len(body)}\n"
                     for name, body in files.items()) + f"{dist}/RECORD,,\n"
    files[f"{dist}/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for member, body in files.items():
            zip_entry(zf, member, body, executable=member.endswith("/uv"))
    data = buf.getvalue()
    name = f"uv-{version}-py3-none-manylinux_2_17_x86_64.whl"
    return PackItem(path=f"tools/{name}", kind="tool", data=data, size=len(data),
                    sha256=hashlib.sha256(data).hexdigest()), None


def write_small_pack(path: Path, *, drop: str | None = None,
                     python: str = HEAD["python"], with_uv: bool = False,
                     lock: bytes | None = None) -> Path:
    """A pack of tests/data/install/pylock.small.toml at ``path``, for a node of
    Python ``python`` (its wheels are pure Python); ``with_uv``: carrying uv
    (:func:`uv_wheel_item`) beside stacklock, as the bootstrap needs; ``lock``:
    these bytes as its lock instead (a hostile one), manifest and all."""
    items = small_pack_items(drop=drop) + ([uv_wheel_item()] if with_uv else [])
    if lock is not None:
        items[0] = (PackItem(path=items[0][0].path, kind="lock", data=lock,
                             size=len(lock), sha256=hashlib.sha256(lock).hexdigest()),
                    None)
    with path.open("wb") as fh:
        _write(fh, items, {**HEAD, "python": python,
                           "lock_sha256": items[0][0].sha256})
    return path


def write_lock_pack(lock: Path, path: Path, *, runfile: bytes | None = None) -> Path:
    """A pack of ``lock`` (one of tests/data/install's locks with its URLs moved,
    its wheels the recorded ones) carrying ``runfile`` as its toolkit."""
    raw = lock.read_bytes()
    read = load_lock(lock)
    items: list[tuple[PackItem, Path | None]] = [(PackItem(
        path=f"lock/{lock.name}", kind="lock", data=raw, size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest()), None)]
    for pkg in read.packages:
        wheel = pkg.wheels[0]
        items.append((PackItem(path=f"wheels/{wheel.filename}", kind="wheel",
                               sha256=str(wheel_sha256(wheel)), size=wheel.size),
                      INSTALL / "wheels" / wheel.filename))
    if runfile is not None:
        assert read.cuda is not None and read.cuda.runfile
        items.append((PackItem(
            path=f"toolkit/{read.cuda.runfile}", kind="runfile", data=runfile,
            size=len(runfile), sha256=hashlib.sha256(runfile).hexdigest(),
            md5=hashlib.md5(runfile).hexdigest()), None))
    name, data = make_self_wheel()
    items.append((PackItem(path=f"tools/{name}", kind="tool", data=data,
                           size=len(data), sha256=hashlib.sha256(data).hexdigest()),
                  None))
    toolkit = read.cuda.version if runfile is not None and read.cuda else None
    with path.open("wb") as fh:
        _write(fh, items, {**HEAD, "toolkit": toolkit,
                           "lock_sha256": items[0][0].sha256})
    return path
