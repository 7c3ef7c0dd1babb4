"""A real Python project that builds with no network: its PEP 517 backend is a
module inside the project (``backend-path``) with no requirements, so uv builds
it in an empty isolated environment. Used to install PEP 751 ``vcs`` and
``directory`` entries for real in the offline tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

BACKEND = '''\
"""Builds this project's one wheel with the standard library only."""
import base64, hashlib, os, zipfile

NAME, VERSION = open("NAME").read().split()


def _line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{path},sha256={digest.decode()},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    files = {f"{NAME}/__init__.py": open(f"{NAME}/__init__.py", "rb").read(),
             f"{info}/METADATA": (f"Metadata-Version: 2.1\\nName: {NAME}\\n"
                                  f"Version: {VERSION}\\n").encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: backend\\n"
                              b"Root-Is-Purelib: true\\nTag: py3-none-any\\n"}
    wheel = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as zf:
        record = []
        for path, data in files.items():
            zf.writestr(path, data)
            record.append(_line(path, data))
        zf.writestr(f"{info}/RECORD", "\\n".join([*record, f"{info}/RECORD,,"]))
    return wheel


build_editable = build_wheel
'''


def make_project(folder: Path, name: str, version: str, value: str) -> Path:
    """``folder`` holding project ``name`` whose module sets ``VALUE = value``."""
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(f"VALUE = {value!r}\n")
    (folder / "NAME").write_text(f"{name} {version}\n")
    (folder / "backend.py").write_text(BACKEND)
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
        'backend-path = ["."]\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\n')
    return folder


def commit_all(folder: Path) -> str:
    """``folder`` as a git repository with one commit; its id."""
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t",
             *args], check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "the project")
    return git("rev-parse", "HEAD")
