"""A small self-extracting script in the shape of NVIDIA's CUDA runfile, and a
lock whose ``[tool.stacklock.cuda]`` runs it (the install tests' toolkit).

The script records the arguments it gets, refuses ``--driver`` the way a
toolkit-only run must never need, writes the installer log, "installs" a toolkit
(bin/nvcc, version.json) into ``--toolkitpath`` and, as NVIDIA's installer may,
points the machine's ``cuda`` symlink (a temporary ``usr-local/cuda`` here) at
it. Its sha256 is not the catalog's: installing it needs
``--allow-unknown-runfile``.
"""

from __future__ import annotations

import hashlib
import random
import tomllib
from typing import TYPE_CHECKING

import tomlkit

from tests.helpers.install_server import Served, local_lock

if TYPE_CHECKING:
    from pathlib import Path

VERSION = "13.0.1"

RUNFILE = """#!/bin/sh
# This script was generated using Makeself 2.4.5 (the shape of cuda_*_linux.run)
ARGS_LOG='{args_log}'
INSTALLER_LOG='{installer_log}'
printf '%s\\n' "$@" > "$ARGS_LOG"
toolkitpath=""
for a in "$@"; do
  case "$a" in
    --driver) echo "a driver install was attempted" >&2; exit 3;;
    --toolkitpath=*) toolkitpath="${{a#--toolkitpath=}}";;
  esac
done
[ -n "$toolkitpath" ] || exit 4
echo "[INFO]: Toolkit: Installed in $toolkitpath" > "$INSTALLER_LOG"
echo "[INFO]: root's log" > '{system_log}'
mkdir -p "$toolkitpath/bin" "$toolkitpath/lib64"
printf '#!/bin/sh\\necho "Cuda compilation tools"\\n' > "$toolkitpath/bin/nvcc"
chmod +x "$toolkitpath/bin/nvcc"
printf '{{"cuda": {{"name": "CUDA SDK", "version": "{version}"}}}}\\n' \\
  > "$toolkitpath/version.json"
mkdir -p "$(dirname '{cuda_link}')"
ln -sfn "$toolkitpath" '{cuda_link}'
exit {rc}
__ARCHIVE_BELOW__
"""


def make_runfile(tmp_path: Path, *, rc: int = 0) -> bytes:
    header = RUNFILE.format(
        args_log=tmp_path / "runfile-args.txt",
        installer_log=tmp_path / "cuda-installer.log",
        system_log=tmp_path / "var-log-cuda-installer.log",
        version=VERSION,
        rc=rc,
        cuda_link=tmp_path / "usr-local" / "cuda",
    )
    payload = random.Random(13).randbytes(300_000)  # the "archive"
    return header.encode() + payload


def toolkit_lock(
    tmp_path: Path,
    base: str,
    served: Served,
    runfile: bytes,
    **overrides: object,
) -> Path:
    lock = local_lock(base, served, tmp_path / "lock" / "pylock.small.toml")
    served.files["/cuda/cuda_13.0.1_580.82.07_linux.run"] = runfile
    prefix = tmp_path / "usr-local" / "cuda-13.0"
    table: dict[str, object] = {
        "version": VERSION,
        "source": "runfile",
        "platform": "linux-x86_64",
        "runfile": "cuda_13.0.1_580.82.07_linux.run",
        "url": f"{base}/cuda/cuda_13.0.1_580.82.07_linux.run",
        "size": len(runfile),
        "md5": hashlib.md5(runfile).hexdigest(),
        "sha256": hashlib.sha256(runfile).hexdigest(),
        "bundled-driver": "580.82.07",
        "min-driver": "580.82.07",
        "prefix": str(prefix),
        "install-args": [
            "--silent", "--toolkit", f"--toolkitpath={prefix}",
            "--no-opengl-libs", "--no-man-page", "--no-drm",
        ],
    }  # fmt: skip
    table.update(overrides)
    data = tomllib.loads(lock.read_text())
    data["tool"] = {"stacklock": {"lock-version": 1, "cuda": table}}
    lock.write_text(tomlkit.dumps(data))
    return lock
