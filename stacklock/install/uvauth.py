"""The credentials of a lock's private indexes, handed to uv the way uv takes them.

A lock holds no credentials (they are stripped when it is written), so install finds
them as resolve did: ``STACKLOCK_INDEX_<NAME>_USERNAME`` / ``_PASSWORD`` for each of
the lock's ``[tool.stacklock] indexes``, and netrc. uv reads netrc by host (``$NETRC``,
else ``~/.netrc``) and nothing of stacklock's, so where the environment names
credentials, uv gets a netrc of its own: the user's entries plus one per index host,
in a file only the user can read, inside the generation's work folder, which is
removed with it once the install ends.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from stacklock.errors import InstallError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["lock_indexes", "uv_credentials"]

_TOKEN = re.compile(r"[^\s\"'#]+")  # what a netrc token may hold unquoted


def _variable(name: str, part: str) -> str:
    return f"STACKLOCK_INDEX_{re.sub(r'[^A-Z0-9]', '_', name.upper())}_{part}"


def uv_credentials(indexes: Iterable[tuple[str, str]], folder: Path, *,
                   environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment for uv (``{"NETRC": path}``), or {} when the environment
    names no credentials for ``indexes`` ((name, url) pairs)."""
    entries = []
    for name, url in indexes:
        user = environ.get(_variable(name, "USERNAME"))
        password = environ.get(_variable(name, "PASSWORD"))
        host = urlsplit(url).hostname
        if host is None or (user is None and password is None):
            continue
        for value, part in ((user or "", "USERNAME"), (password or "", "PASSWORD")):
            if value and not _TOKEN.fullmatch(value):
                raise InstallError(
                    f"{_variable(name, part)}: holds a space, quote or '#', which uv's "
                    "netrc cannot carry",
                    hint="use a token without them, or put the credentials in "
                         "~/.netrc yourself")
        entries.append(" ".join([f"machine {host}",
                                 *([f"login {user}"] if user else []),
                                 *([f"password {password}"] if password else [])]))
    if not entries:
        return {}
    own = Path(environ.get("NETRC") or Path.home() / ".netrc")
    text = "\n".join(entries) + "\n"
    if own.is_file():
        text += own.read_text("utf-8", errors="replace")  # ours first: they win
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "netrc"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return {"NETRC": str(path)}


def lock_indexes(content: bytes, *,
                 environ: Mapping[str, str] = os.environ) -> list[tuple[str, str]]:
    """(name, url) of each index a lock's ``[tool.stacklock]`` names; [] when the
    bytes are no TOML (the lock's reader reports that), and without reading them
    when the environment names no index credentials at all (the usual case: a
    warm install starts uv ~20 ms sooner than parsing a big lock would allow)."""
    if not any(key.startswith("STACKLOCK_INDEX_") for key in environ):
        return []
    from stacklock.bounded import Malformed, parse_toml

    try:
        data = parse_toml(content)
    except Malformed:
        return []
    tool = data.get("tool")
    stack = tool.get("stacklock") if isinstance(tool, dict) else None
    found = stack.get("indexes") if isinstance(stack, dict) else None
    return [(str(i["name"]), str(i["url"])) for i in found or []
            if isinstance(i, dict) and "name" in i and "url" in i]
