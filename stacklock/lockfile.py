"""Reading any PEP 751 file: the one place that opens, parses and validates locks.

Every reader (``lock.load_lock``, install's plan, validate, diff, the driver check)
starts here, so a missing file, bad TOML, a file that is not PEP 751 and a
``[tool.stacklock]`` of an unknown version give the same one-line errors everywhere.
What each reader then takes from the document is its own business.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.pylock import Pylock, PylockValidationError

from stacklock.errors import LockError

__all__ = ["TOOL_LOCK_VERSION", "LockFile", "parse_lock_file", "read_lock_file"]

TOOL_LOCK_VERSION = 1  # the [tool.stacklock] lock-version this stacklock reads


@dataclass(frozen=True, kw_only=True)
class LockFile:
    path: str
    text: str
    data: dict[str, Any]  # the TOML document as parsed
    pylock: Pylock  # validated by packaging
    stacklock: dict[str, Any] | None  # [tool.stacklock], None when absent (uv locks)


def _first_line(text: object) -> str:
    return str(text).strip().splitlines()[0] if str(text).strip() else str(text)


def read_lock_file(path: str | Path) -> LockFile:
    where = str(path)
    try:
        content = Path(path).read_bytes()
    except FileNotFoundError:
        raise LockError(f"{where}: no such lock file",
                        hint="stacklock resolve PROFILE writes "
                        "locks/pylock.PROFILE.toml") from None
    except OSError as exc:
        raise LockError(f"{where}: cannot read the lock: {exc.strerror or exc}",
                        hint="check the path and its permissions") from None
    return parse_lock_file(content, path=where)


def parse_lock_file(content: bytes, *, path: str) -> LockFile:
    """Validate ``content`` as PEP 751 (and its [tool.stacklock] version). Pure."""
    try:
        text = content.decode("utf-8")
        data = tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LockError(f"{path}: not valid TOML: {_first_line(exc)}",
                        hint="pass a PEP 751 lock such as pylock.toml") from None
    try:
        pylock = Pylock.from_dict(data)
    except PylockValidationError as exc:
        key = exc.context or "(top level)"
        reason = _first_line(exc.message)
        raise LockError(f"{path}: not a PEP 751 lock: {key}: {reason}",
                        hint="regenerate it with stacklock resolve, or pass a "
                        "PEP 751 lock (lock-version 1.x)") from None
    tool = data.get("tool", {})
    stacklock = tool.get("stacklock") if isinstance(tool, dict) else None
    if stacklock is not None:
        if not isinstance(stacklock, dict):
            raise LockError(f"{path}: tool.stacklock: expected a table, found "
                            f"{type(stacklock).__name__}")
        version = stacklock.get("lock-version", TOOL_LOCK_VERSION)
        if version != TOOL_LOCK_VERSION:
            raise LockError(f"{path}: tool.stacklock.lock-version {version!r} is not "
                            f"supported (this stacklock reads {TOOL_LOCK_VERSION})",
                            hint="upgrade stacklock to read this lock")
    return LockFile(path=path, text=text, data=data, pylock=pylock,
                    stacklock=stacklock)
