"""Benchmark ``stacklock install`` against ``uv venv`` + ``uv pip sync`` of one lock.

Both tools install the same PEP 751 lock into a new venv built from the same
interpreter, as separate processes, cold (fresh, empty cache directories for
both stacklock and the uv it drives) and warm (a new venv, the caches the cold
run left), alternating which tool goes first from one repetition to the next.
Prints per phase the median wall time, the ratio stacklock/uv and the median
CPU time (user + system) of each tool, every run's time, the load average before
and after, and the disk each tool's caches hold after its cold run (stacklock's
store plus the uv cache it drives, against uv's cache; a file hard-linked into a
venv counts once).
stacklock runs with ``--allow-no-gpu`` (no GPU here) and, unless
``--with-validate``, ``--no-validate``: validation is work uv does not do,
reported separately when asked for.

    .venv/bin/python scripts/bench_install.py LOCK --python /path/to/python3.12
        [--repeat 2] [--warm N] [--with-validate] [--first uv|sl] [--json]

``--warm N`` installs each tool N times warm after its cold install, alternating
which goes first: a warm install of a big lock takes 1-2 s and moves by half a
second from one to the next on a shared machine.

Before each install the files the one before wrote are flushed (``os.sync()``),
and before each cold one the kernel's page cache is dropped too where this user
may (``/proc/sys/vm/drop_caches``, root), neither timed: a cold install of a big
lock leaves ~10 GB in memory, and the next tool pays for their writeback and
their reclaim. Without that the tool that went first won the cold phase by a
factor of up to two (37.7 s against 73.7 s one way round, 50.1 s against
86.7 s the other; flushing alone, 27.3 s against 66.0 s). The output says
whether the cache could be dropped.

A big lock (``locks/pylock.pypi-cu130.toml``: 207 wheels, 4.3 GB) needs room for
both tools' caches at once, about 25 GB under ``$TMPDIR``; ``--repeat 1`` per
call keeps it there.

Talks to the lock's indexes (real PyPI for the committed PyPI locks). uv runs
with ``UV_PYTHON_DOWNLOADS=never`` and the explicit interpreter, so neither tool
pays for interpreter discovery or downloads.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import stacklock_command, timed, uv_binary

import stacklock

KINDS = ("uv-cold", "sl-cold", "uv-warm", "sl-warm")


def _env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(cache / "uv"),
        "STACKLOCK_CACHE_DIR": str(cache / "stacklock"),
    }


def disk_bytes(root: Path) -> int:
    """Bytes allocated under ``root``, each inode once (uv hard-links venvs to
    its cache)."""
    seen: set[int] = set()
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(folder, name))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_blocks * 512
    return total


def run_uv(lock: Path, python: str, cache: Path, venv: Path) -> tuple[float, float]:
    env = _env(cache)
    quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    made = timed([uv_binary(), "venv", "-q", "--python", python, str(venv)], **quiet)
    synced = timed(
        [uv_binary(), "pip", "sync", "-q", "--python", str(venv / "bin" / "python"),
         str(lock)],
        **quiet,
    )
    return made[0] + synced[0], made[1] + synced[1]


def run_stacklock(
    lock: Path, python: str, cache: Path, venv: Path, *, validate: bool
) -> tuple[float, float]:
    cmd = [*stacklock_command(), "install", str(lock), "--venv", str(venv),
           "--python", python, "--allow-no-gpu"]
    if not validate:
        cmd.append("--no-validate")
    return timed(cmd, env=_env(cache), stdout=subprocess.DEVNULL)


DROPPED: list[bool] = []  # whether each drop of the page cache was allowed


def settle(*, drop: bool) -> None:
    """Write out what the run before left in dirty pages and, with ``drop``,
    empty the page cache (root only; elsewhere it is recorded as not done)."""
    os.sync()
    if not drop:
        return
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("1\n")
    except OSError:
        DROPPED.append(False)
    else:
        DROPPED.append(True)


def bench(lock: Path, python: str, repeat: int, validate: bool,
          first: str = "uv", warm: int = 1) -> dict[str, object]:
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    cpus: dict[str, list[float]] = {k: [] for k in KINDS}
    disk: dict[str, list[int]] = {"uv": [], "sl": []}
    for rep in range(repeat):
        # the second tool of a phase finds the page cache full of the first's
        # files (a big lock writes ~10 GB each): alternate, and with --repeat 1
        # let --first pick, so that separate runs can alternate too
        order = [first, "sl" if first == "uv" else "uv"]
        if rep % 2:
            order.reverse()
        with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
            root = Path(tmp)
            # one cold install each, then ``warm`` warm ones each, alternating
            rounds = [("cold", order)] + [
                ("warm", order if i % 2 == 0 else order[::-1]) for i in range(warm)]
            for n, (phase, tools) in enumerate(rounds):
                for tool in tools:
                    venv = root / f"{tool}-{phase}-{n}-venv"
                    cache = root / f"{tool}-cache"
                    settle(drop=phase == "cold")
                    if tool == "uv":
                        seconds, cpu = run_uv(lock, python, cache, venv)
                    else:
                        seconds, cpu = run_stacklock(
                            lock, python, cache, venv, validate=validate
                        )
                    times[f"{tool}-{phase}"].append(seconds)
                    cpus[f"{tool}-{phase}"].append(cpu)
                    if phase == "cold":
                        disk[tool].append(disk_bytes(cache))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "lock": str(lock),
        "validate": validate,
        "seconds": {k: round(v, 2) for k, v in med.items()},
        "all-seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "cpu-seconds": {k: round(statistics.median(v), 2) for k, v in cpus.items()},
        "all-cpu-seconds": {k: [round(x, 2) for x in v] for k, v in cpus.items()},
        "cache-gb": {k: round(max(v) / 1e9, 2) for k, v in disk.items()},
        "cold-ratio": round(med["sl-cold"] / med["uv-cold"], 2),
        "warm-ratio": round(med["sl-warm"] / med["uv-warm"], 2),
        "page-cache-dropped": bool(DROPPED) and all(DROPPED),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lock", type=Path)
    parser.add_argument("--python", required=True,
                        help="the interpreter both tools build the venv from")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--with-validate", action="store_true")
    parser.add_argument("--first", choices=("uv", "sl"), default="uv",
                        help="which tool goes first in the first repetition")
    parser.add_argument("--warm", type=int, default=1, metavar="N",
                        help="warm installs per tool after each cold one, "
                             "alternating which goes first (default 1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    # stacklock's modules as bytecode, as after any first run: compiling them at
    # a start is not install time
    compileall.compile_dir(str(Path(stacklock.__file__).parent), quiet=1)
    load = os.getloadavg()
    result = bench(args.lock.resolve(), args.python, args.repeat, args.with_validate,
                   args.first, warm=max(args.warm, 1))
    result["load-average"] = {"before": [round(x, 2) for x in load],
                              "after": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    s, c = result["seconds"], result["cpu-seconds"]
    assert isinstance(s, dict) and isinstance(c, dict)
    print(f"{args.lock} ({'with' if args.with_validate else 'without'} validate), "
          f"load average before/after {result['load-average']}")
    runs = result["all-seconds"]
    assert isinstance(runs, dict)
    for phase in ("cold", "warm"):
        print(f"    {phase}: stacklock {s[f'sl-{phase}']:.2f} s, uv "
              f"{s[f'uv-{phase}']:.2f} s, ratio {result[f'{phase}-ratio']}; cpu "
              f"stacklock {c[f'sl-{phase}']:.2f} s, uv {c[f'uv-{phase}']:.2f} s; "
              f"runs stacklock {runs[f'sl-{phase}']}, uv {runs[f'uv-{phase}']}")
    gb = result["cache-gb"]
    assert isinstance(gb, dict)
    print(f"    caches after cold: stacklock {gb['sl']} GB, uv {gb['uv']} GB; page "
          f"cache dropped before each cold install: "
          f"{'yes' if result['page-cache-dropped'] else 'no (not root)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
