"""A real git repository holding a small Python project, for the tests of
direct references (``name @ git+file://...``): made with git itself."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "demo-direct"
version = "{version}"
requires-python = ">=3.9"
dependencies = ["six>=1.15"]
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=env,
                          capture_output=True, text=True).stdout.strip()


def make_repo(path: Path) -> tuple[str, str]:
    """demo-direct 0.1.0 (annotated tag v0.1.0), then 0.2.0 on branch main;
    (the commit of v0.1.0, the commit of main)."""
    (path / "src" / "demo_direct").mkdir(parents=True)
    (path / "src" / "demo_direct" / "__init__.py").write_text("VALUE = 1\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "pyproject.toml").write_text(PYPROJECT.format(version="0.1.0"))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "0.1.0")
    git(path, "tag", "-a", "v0.1.0", "-m", "release 0.1.0")
    first = git(path, "rev-parse", "HEAD")
    (path / "pyproject.toml").write_text(PYPROJECT.format(version="0.2.0"))
    git(path, "commit", "-qam", "0.2.0")
    return first, git(path, "rev-parse", "HEAD")
