"""``python3 PACK install|validate|list``: the bootstrap inside every pack.

It runs on a node that has only Python: it checks the pack and the node, unpacks
uv and stacklock from the pack (sha256-checked) into a temporary venv built by that
uv, and hands over to that stacklock (``stacklock install PACK`` or ``stacklock
validate``), which does the work exactly as it does anywhere else. The temporary
venv is removed at exit. Like ``stacklock.cli``, this is a command line, so it
prints; nothing here imports beyond the standard library (see format.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from stacklock._fs import cache_dir
from stacklock.bounded import shorten
from stacklock.errors import PackError, StacklockError
from stacklock.install.uvsteps import is_uv_setting
from stacklock.pack.format import (
    Manifest,
    check_node,
    check_space,
    copy_member,
    read_manifest,
    render_listing,
    scratch_dir,
)
from stacklock.uvoutput import capture, last_line

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main", "node_needs", "run_handing_on_stops"]

# an installed venv takes about this many times its wheels' bytes (as install's
# preflight counts), a tool venv likewise
UNPACKED_FACTOR = 3


def node_needs(manifest: Manifest, *, cache: Path, venv: Path | None,
               toolkit_prefix: Path | None) -> dict[Path, int]:
    """Bytes written under each place by an install of this pack (a bound)."""
    tools = sum(m.size for m in manifest.of_kind("tool"))
    needs = {cache: tools * (1 + UNPACKED_FACTOR)}
    if venv is not None:
        wheels = sum(m.size for m in manifest.of_kind("wheel"))
        needs[cache] += wheels
        needs[venv.parent] = needs.get(venv.parent, 0) + wheels * UNPACKED_FACTOR
        for run in manifest.of_kind("runfile"):
            needs[cache] += run.size
            prefix = toolkit_prefix or cache
            needs[prefix] = needs.get(prefix, 0) + run.size * 2
    return needs


def _env(scratch: Path, cache: Path) -> dict[str, str]:
    """The bootstrap's uv and the stacklock it hands on to run without the
    user's ``PYTHON*`` and ``UV_*`` settings (those :mod:`stacklock install
    <stacklock.install.uvsteps>` drops: a UV_CONSTRAINT or UV_REQUIRE_HASHES
    stopped the bootstrap's own install)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON") and not is_uv_setting(k)}
    env.update(UV_CACHE_DIR=str(scratch / "uv-cache"), UV_PYTHON_DOWNLOADS="never",
               UV_OFFLINE="1", UV_NO_CONFIG="1", STACKLOCK_CACHE_DIR=str(cache))
    return env


def _run(argv: list[str], env: dict[str, str], what: str) -> None:
    said = capture(argv, env=env, timeout=1800)
    if said.rc != 0:
        tail = last_line(said.stderr) or last_line(said.stdout) or "no output"
        raise PackError(f"{what} failed (exit {said.rc}): {shorten(tail, 200)}",
                        hint="is this the Python the pack was made for?")


def _tool_venv(pack: Path, manifest: Manifest, scratch: Path,
               env: dict[str, str]) -> Path:
    """Unpack the tool wheels (checked), take uv out of its wheel, and let it build
    a venv with stacklock; returns that venv's ``stacklock``."""
    wheels = scratch / "tools"
    wheels.mkdir()
    files = []
    for member in manifest.of_kind("tool"):
        files.append(wheels / member.name)
        copy_member(pack, member, files[-1])
    uv_wheel = next((f for f in files if f.name.startswith("uv-")), None)
    if uv_wheel is None:
        raise PackError(f"{pack}: no uv wheel in the pack",
                        hint="make the pack again with `stacklock pack`")
    uv = scratch / "uv"
    with zipfile.ZipFile(uv_wheel) as zf:
        entry = next((n for n in zf.namelist() if n.endswith(".data/scripts/uv")), None)
        if entry is None:
            raise PackError(f"{pack}: {uv_wheel.name} holds no uv binary")
        uv.write_bytes(zf.read(entry))
    uv.chmod(0o755)
    venv = scratch / "tool"
    _run([str(uv), "venv", "--quiet", "--no-config", "--python", sys.executable,
          str(venv)], env,
         "uv venv (the bootstrap's own venv)")
    _run([str(uv), "pip", "install", "--quiet", "--no-config", "--python",
          str(venv / "bin/python"), "--no-index", "--no-deps", "--offline",
          *map(str, files)], env,
         "uv pip install of stacklock (the bootstrap)")
    return venv / "bin" / "stacklock"


def _report_option(p: argparse.ArgumentParser) -> None:
    """``--report DIR`` as ``stacklock install`` and ``validate`` call it;
    ``--report-dir`` is what packs made before took (and what the fleet
    playbook passes, for a pack of any age)."""
    p.add_argument("--report", "--report-dir", dest="report_dir", metavar="DIR",
                   help="write report.json and report.md here")


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Install a locked stack from this pack, with no "
        "network and nothing but Python.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("install", help="check, install, then validate")
    p.add_argument("--venv", required=True, help="the venv path (a symlink)")
    p.add_argument("--toolkit-prefix", metavar="PATH", help="where the toolkit goes")
    p.add_argument("--allow-no-gpu", action="store_true",
                   help="install without a driver (e.g. to build an image)")
    p.add_argument("--allow-unknown-runfile", action="store_true",
                   help="run a CUDA runfile whose sha256 is not the catalog's for "
                   "its release (by default refused: a lock is code)")
    _report_option(p)
    p = sub.add_parser("validate", help="validate an installed venv only")
    p.add_argument("--venv", required=True)
    p.add_argument("--toolkit-prefix", metavar="PATH",
                   help="the toolkit to check (default: the lock's prefix)")
    p.add_argument("--allow-no-gpu", action="store_true",
                   help="skip, with the reason, what needs a driver or a GPU")
    _report_option(p)
    p = sub.add_parser("list", help="contents, sizes and target")
    p.add_argument("--json", action="store_true")
    return parser


def _command(args: argparse.Namespace, pack: Path, manifest: Manifest,
             tool: Path, scratch: Path, cache: Path) -> list[str]:
    if args.command == "validate":
        # where `install` keeps it too, so reports name one lock path
        lock = cache / "packs" / manifest.lock_sha256 / manifest.lock.name
        copy_member(pack, manifest.lock, scratch / "lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        os.replace(scratch / "lock", lock)
        argv = [str(tool), "validate", str(lock), "--venv", args.venv]
    else:
        argv = [str(tool), "install", str(pack), "--venv", args.venv,
                "--python", sys.executable]
    if args.allow_no_gpu:
        argv.append("--allow-no-gpu")
    if getattr(args, "allow_unknown_runfile", False):
        argv.append("--allow-unknown-runfile")
    if args.toolkit_prefix:
        argv += ["--toolkit-prefix", args.toolkit_prefix]
    if args.report_dir:
        argv += ["--report", args.report_dir]
    return argv


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP before the stacklock that does the work started."""

    def __init__(self, signo: int) -> None:
        super().__init__(signo)
        self.signo = signo


def run_handing_on_stops(argv: Sequence[str], env: dict[str, str]) -> int:
    """Run the stacklock that does the work and wait for it; a SIGTERM or
    SIGHUP sent to the bootstrap (a cancelled job, a closed terminal) is handed
    on to it, which stops uv and removes its new generation as Ctrl-C does,
    and the bootstrap waits for that. Ctrl-C reaches both from the terminal:
    the bootstrap waits too. Returns the exit code; -N: ended by signal N."""
    proc = subprocess.Popen(list(argv), env=env)

    def hand_on(signo: int, frame: object) -> None:
        proc.send_signal(signo)

    kept = {stop: signal.signal(stop, hand_on) for stop in _STOPS
            if signal.getsignal(stop) is not signal.SIG_IGN}
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # the child has it too: let it unwind
                continue
    finally:
        for stop, handler in kept.items():
            signal.signal(stop, handler)


_STOPS = (signal.SIGTERM, signal.SIGHUP)


def _raise_stopped(signo: int, frame: object) -> None:
    raise _Stopped(signo)


def _end_by(signo: int) -> None:
    """End as the signal that stopped the work would have (128 + its number)."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signo, signal.SIG_DFL)
    os.kill(os.getpid(), signo)


def main(argv: Sequence[str] | None = None, *, pack: Path | None = None) -> int:
    """The bootstrap; a stop (Ctrl-C, SIGTERM, SIGHUP) leaves no scratch folder
    and ends the process by that signal."""
    for stop in _STOPS:
        if signal.getsignal(stop) is not signal.SIG_IGN:
            signal.signal(stop, _raise_stopped)
    code = _main(argv, pack=pack)
    if code > 128 and code - 128 in (signal.SIGINT, *_STOPS):
        _end_by(code - 128)
    return code


def _main(argv: Sequence[str] | None, *, pack: Path | None) -> int:
    pack = Path(os.path.abspath(pack or sys.argv[0]))
    args = _parser(f"python3 {pack.name}").parse_args(argv)
    try:
        manifest = read_manifest(pack)
        if args.command == "list":
            total = pack.stat().st_size
            if args.json:
                from stacklock.jsonout import json_document

                sys.stdout.write(json_document(
                    "pack-list", manifest.to_json(path=pack, size=total)))
            else:
                print(render_listing(manifest, pack, total))
            return 0
        check_node(manifest, pack)
        cache = cache_dir()
        venv = Path(os.path.abspath(args.venv)) if args.command == "install" else None
        prefix = getattr(args, "toolkit_prefix", None)
        check_space(node_needs(manifest, cache=cache, venv=venv,
                               toolkit_prefix=Path(prefix) if prefix else None), pack)
        with scratch_dir(cache) as scratch:
            env = _env(scratch, cache)
            tool = _tool_venv(pack, manifest, scratch, env)
            command = _command(args, pack, manifest, tool, scratch, cache)
            code = run_handing_on_stops(command, env)
        return 128 - code if code < 0 else code  # the child said why it stopped
    except StacklockError as exc:
        print(f"stacklock: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signo = exc.signo if isinstance(exc, _Stopped) else signal.SIGINT
        print(f"stacklock: stopped by {signal.Signals(signo).name}; nothing was "
              "half-written", file=sys.stderr)
        return 128 + signo
