"""The two uv commands that build one generation, the environment uv runs in,
and the name of the lock copy they install from: shared by the install plan and
uv's head start, which starts them before the plan is made (so this module imports
next to nothing).

uv installs exactly the lock's files whatever the user's uv configuration says:
every uv command install runs has ``--no-config`` (no ``uv.toml`` or
``pyproject.toml`` of the working directory, the user or the system is read: a
``constraint-dependencies``, an ``index-url``, ``no-binary`` or a file that is not
TOML changes nothing), and every ``UV_*`` variable but those of :data:`UV_KEPT`
(where the cache is, how files are linked, timeouts, TLS, the keyring) is removed
from its environment (``UV_CONSTRAINT``, ``UV_INDEX_URL``, ``UV_CONFIG_FILE``,
``UV_NO_VERIFY_HASHES`` ...). uv reads no ``PIP_*`` variable. The pack's bootstrap
builds its own venv by the same rule (it carries this module: standard library
only).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

__all__ = ["BUILD_CONFIG_NAME", "UV_KEPT", "UV_LOCK_NAME", "is_uv_setting",
           "uv_commands", "uv_environment"]

# uv settings that change how, never what, uv installs
UV_KEPT = frozenset({
    "UV_CACHE_DIR", "UV_NO_CACHE", "UV_LINK_MODE", "UV_COMPILE_BYTECODE",
    "UV_CONCURRENT_DOWNLOADS", "UV_CONCURRENT_BUILDS", "UV_CONCURRENT_INSTALLS",
    "UV_HTTP_TIMEOUT", "UV_REQUEST_TIMEOUT", "UV_HTTP_RETRIES", "UV_NATIVE_TLS",
    "UV_KEYRING_PROVIDER", "UV_NO_PROGRESS", "UV_NO_COLOR", "UV_LOG_CONTEXT",
    "UV_PYTHON_INSTALL_DIR", "UV_PYTHON_DOWNLOADS", "UV_PYTHON_INSTALL_MIRROR",
    "UV_PYTHON_PREFERENCE", "UV_OFFLINE",
})
NO_CONFIG = "--no-config"
CLIENT_LOG = "uv_client=debug"  # a line for each URL: from its cache or the network


def is_uv_setting(key: str) -> bool:
    """Whether the variable ``key`` is a ``UV_*`` setting install's uv runs
    without (one that may change what uv installs: not in :data:`UV_KEPT`)."""
    return key.startswith("UV_") and key not in UV_KEPT


def uv_environment(environ: Mapping[str, str] = os.environ
                   ) -> dict[str, str | None]:
    """The changes to ``environ`` a uv command of install runs with: every
    ``UV_*`` variable not in :data:`UV_KEPT` removed (None), and uv's HTTP
    client told to log what it did for each URL (what install reports uv
    fetched: :mod:`~stacklock.install.fetched`)."""
    changes: dict[str, str | None] = {key: None for key in environ
                                      if is_uv_setting(key)}
    wanted = environ.get("RUST_LOG")
    changes["RUST_LOG"] = f"{wanted},{CLIENT_LOG}" if wanted else CLIENT_LOG
    return changes

UV_LOCK_NAME = "pylock.install.toml"  # the copy of the lock uv installs from
BUILD_CONFIG_NAME = "uv-build.toml"  # beside it: uv's config for match-runtime builds


def uv_commands(uv: str, python: str, generation_dir: Path, uv_lock: Path,
                build: Sequence[str], *, options: Sequence[str] = (),
                require_hashes: bool = True) -> tuple[tuple[str, ...], ...]:
    """``uv venv`` and ``uv pip sync`` of one generation, in that order.
    ``options``: ``--extra``/``--group`` choosing what the lock installs;
    ``require_hashes`` off only for a lock with vcs or directory sources (no
    hash in PEP 751), where uv still checks every hash the lock gives."""
    hashes = ("--require-hashes",) if require_hashes else ()
    return (
        (uv, "venv", NO_CONFIG, "--python", python, str(generation_dir)),
        (
            uv, "pip", "sync", NO_CONFIG, "--python",
            str(generation_dir / "bin" / "python"), *hashes, *build, *options,
            "--preview-features", "pylock", str(uv_lock),
        ),
    )  # fmt: skip
