"""Build real wheels, venvs and locks for the validate tests.

Wheels are written to the wheel spec (METADATA, WHEEL, RECORD with a sha256 per file)
and installed with the real uv, so the venvs under test are what an install makes.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

UV = str(Path(sys.executable).parent / "uv")


def _digest(data: bytes) -> str:
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def build_wheel(folder: Path, name: str, version: str, files: dict[str, bytes], *,
                requires: tuple[str, ...] = (), tag: str = "py3-none-any",
                executable: tuple[str, ...] = ()) -> Path:
    """A wheel holding ``files`` (archive path -> bytes); the paths in
    ``executable`` get mode 755, as installers read it from the zip entry."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    contents = dict(files)
    contents[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    purelib = "true" if "none-any" in tag else "false"
    contents[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: wheelkit\n"
                                 f"Root-Is-Purelib: {purelib}\nTag: {tag}\n").encode()
    record = [f"{path},{_digest(data)},{len(data)}" for path, data in contents.items()]
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for arc, data in contents.items():
            entry = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if arc in executable else 0o644) << 16
            zf.writestr(entry, data)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_venv(folder: Path) -> Path:
    """A real venv made by uv with this interpreter; returns its python."""
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(folder)],
                   check=True, capture_output=True)
    return folder / "bin" / "python"


def uv_install(python: Path, *wheels: Path, no_deps: bool = True) -> None:
    argv = [UV, "pip", "install", "-q", "--offline", "--no-index", "--python",
            str(python), *(str(w) for w in wheels)]
    if no_deps:
        argv.append("--no-deps")
    subprocess.run(argv, check=True, capture_output=True)


def store_wheel(cache: Path, wheel: Path) -> str:
    """Put ``wheel`` where the artifact store looks for its sha256."""
    digest = sha256(wheel)
    target = cache / "artifacts" / "sha256" / digest[:2] / digest
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(wheel.read_bytes())
    return digest


def write_lock(path: Path, wheels: list[Path], *, overrides: tuple[str, ...] = (),
               validate: str = "", extra_tool: str = "") -> Path:
    """A PEP 751 lock of ``wheels`` with a [tool.stacklock] table."""
    lines = ['lock-version = "1.0"', 'created-by = "stacklock"', ""]
    for wheel in sorted(wheels, key=lambda w: w.name):
        name, version = wheel.name.split("-")[:2]
        lines += ["[[packages]]", f'name = "{canonicalize_name(name)}"',
                  f'version = "{version}"', "", "[[packages.wheels]]",
                  f'name = "{wheel.name}"', f'url = "{wheel.as_uri()}"',
                  f'hashes = {{sha256 = "{sha256(wheel)}"}}', ""]
    quoted = ", ".join(f'"{o}"' for o in overrides)
    lines += ["[tool.stacklock]", "lock-version = 1", 'profile = "test"',
              f"overrides = [{quoted}]", extra_tool, ""]
    if validate:
        lines += ["[tool.stacklock.validate]", validate, ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
