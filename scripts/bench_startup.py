"""Benchmark stacklock's start-up: the time before a command does its work.

Each case runs as a fresh process ``--runs`` times (median and spread printed):

- ``python``: ``python -c pass``, the interpreter alone, for scale;
- ``--help``: the ``stacklock`` command beside the interpreter, ``--help``;
- ``resolve-imports``: importing what ``stacklock resolve`` loads before it asks
  an index for anything (the command module, the replay check, the resolver);
- ``replay-imports``: what a replay of an unchanged resolution loads (no resolver);
- ``install-imports``: what ``stacklock install`` of a lock of wheels loads
  before uv runs.

Then, with ``--breakdown``, the slowest imports of each import case by
``python -X importtime`` (cumulative microseconds, one run).

    .venv/bin/python scripts/bench_startup.py [--runs 21] [--breakdown 12] [--json]

The children run with ``python -P`` (no script or current folder on the path),
so the ``stacklock`` on ``sys.path`` (``PYTHONPATH`` first, then the installed
one) is what is measured: point ``PYTHONPATH`` at another checkout to compare.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PY = [sys.executable, "-P"]
IMPORTS = {
    "resolve-imports": ("stacklock.cli.resolve", "stacklock.resolve.memo",
                        "stacklock.resolve.locking"),
    "replay-imports": ("stacklock.cli.resolve", "stacklock.resolve.memo"),
    "install-imports": ("stacklock.cli.install", "stacklock.install.run",
                        "stacklock.install.render"),
}


def cases() -> dict[str, list[str]]:
    command = str(Path(sys.executable).with_name("stacklock"))
    found = {"python": [*PY, "-c", "pass"], "--help": [command, "--help"]}
    for name, modules in IMPORTS.items():
        found[name] = [*PY, "-c", "import " + ", ".join(modules)]
    return found


def wall(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(runs: int) -> dict[str, list[float]]:
    """Every case once per round, round after round, so that a busy moment of a
    shared machine spreads over all of them rather than landing on one."""
    todo = cases()
    for cmd in todo.values():  # bytecode written, files in the page cache
        wall(cmd)
    times: dict[str, list[float]] = {name: [] for name in todo}
    for _ in range(runs):
        for name, cmd in todo.items():
            times[name].append(wall(cmd))
    return times


def breakdown(modules: tuple[str, ...], top: int) -> list[tuple[str, int]]:
    """``(module, cumulative us)`` of the ``top`` slowest imports, by
    ``python -X importtime``."""
    done = subprocess.run(
        [*PY, "-X", "importtime", "-c", "import " + ", ".join(modules)],
        check=True, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((parts[2].rstrip(), int(parts[1])))
    return sorted(rows, key=lambda row: -row[1])[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--breakdown", type=int, default=0, metavar="N",
                        help="the N slowest imports of each import case")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import stacklock

    where = Path(stacklock.__file__).parent
    compileall.compile_dir(str(where), quiet=1)
    load = os.getloadavg()
    times = measure(max(args.runs, 1))
    result: dict[str, object] = {
        "stacklock": str(where),
        "runs": args.runs,
        "median-seconds": {k: round(statistics.median(v), 4) for k, v in times.items()},
        "min-seconds": {k: round(min(v), 4) for k, v in times.items()},
        "max-seconds": {k: round(max(v), 4) for k, v in times.items()},
        "load-average": {"before": [round(x, 2) for x in load],
                         "after": [round(x, 2) for x in os.getloadavg()]},
    }
    if args.breakdown:
        result["importtime-us"] = {name: breakdown(modules, args.breakdown)
                                   for name, modules in IMPORTS.items()}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"stacklock from {where}, {args.runs} runs each, load average "
          f"before/after {result['load-average']}")
    for name in times:
        med = statistics.median(times[name])
        print(f"    {name:16} median {med:.3f} s  (min {min(times[name]):.3f}, "
              f"max {max(times[name]):.3f})")
    for name, rows in result.get("importtime-us", {}).items():  # type: ignore[union-attr]
        print(f"  {name}: slowest imports (cumulative, -X importtime)")
        for module, us in rows:
            print(f"    {us / 1000:8.1f} ms  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
