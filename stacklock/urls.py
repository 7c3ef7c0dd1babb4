"""Keeping credentials out of errors, logs and files.

An index URL may carry ``user:password@`` (or a bare token user). A lock records
the URL without it (:func:`strip_credentials`); anything shown to a person masks
the secret (:func:`redact_url`, and :func:`redact_text` for messages that may echo
a URL, such as an exception's text).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

__all__ = ["file_url_path", "redact_text", "redact_url", "strip_credentials"]

_USERINFO = re.compile(r"//([^/@\s]+)@")


def _mask(userinfo: str) -> str:
    user, sep, _password = userinfo.partition(":")
    return f"{user}:***" if sep else "***"


def redact_url(url: str) -> str:
    """``https://user:secret@host/x`` -> ``https://user:***@host/x``; a bare token
    user (``https://tok@host``) becomes ``***@``. For errors, logs and output."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=f"{_mask(userinfo)}@{host}"))


def strip_credentials(url: str) -> str:
    """The URL without any user info: what a lock file records."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def redact_text(text: str, *, url: str | None = None) -> str:
    """``text`` with the user info of every URL in it masked as :func:`redact_url`
    does; with ``url``, its password is masked wherever else it appears too."""
    text = _USERINFO.sub(lambda m: f"//{_mask(m.group(1))}@", text)
    password = urlsplit(url).password if url else None
    return text.replace(password, "***") if password else text


def file_url_path(url: str) -> Path | None:
    """The path on this machine a ``file://`` URL names, None for any other
    URL: a folder index's files (and a lock's ``file://`` URLs) are read where
    they are, never asked of the HTTP client."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return None
    # urllib.request loads http.client and email (~35 ms): only for a file URL
    from urllib.request import url2pathname

    return Path(url2pathname(parts.path))
