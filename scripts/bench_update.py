"""``stacklock update`` with nothing changed against a warm ``resolve --check``
of the same profile and lock, side by side in one run.

    python scripts/bench_update.py                        # pypi-small
    python scripts/bench_update.py pypi-cu130 --repeat 11 --json

Both run as a scheduled job would, each a new process, on a copy of the
committed lock ``locks/pylock.PROFILE.toml`` and a cache of their own (a
temporary folder, filled by one run of each first: the indexes are asked
then, never in the measured runs). Then alternating, ``--repeat`` times each:
``resolve --check`` must exit 0 and ``update`` must exit 0 and leave the lock's
bytes as they were. Prints the medians of wall and CPU (user + system) time
and update's over check's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one stacklock process, which must exit 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "stacklock.cli", *argv], cwd=cwd,
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", nargs="?", default="pypi-small")
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--no-check", action="store_true",
                        help="both without the native check")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    committed = ROOT / "locks" / f"pylock.{args.profile}.toml"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        lock = work / committed.name
        shutil.copyfile(committed, lock)
        env = {**os.environ, "STACKLOCK_CACHE_DIR": str(work / "cache"),
               "PYTHONPATH": str(ROOT)}
        extra = ["--no-check"] if args.no_check else []
        check = ["resolve", "--check", args.profile, "-o", str(lock), *extra]
        update = ["update", args.profile, "-o", str(lock), *extra]
        for argv in (check, update):  # fill the cache; each run replays after
            _run(argv, env, ROOT)
        times: dict[str, list[tuple[float, float]]] = {"check": [], "update": []}
        for _ in range(args.repeat):
            times["check"].append(_run(check, env, ROOT))
            times["update"].append(_run(update, env, ROOT))
            if lock.read_bytes() != committed.read_bytes():
                raise SystemExit("update wrote the lock: it was not unchanged")
    medians = {name: {"wall": statistics.median(t[0] for t in runs),
                      "cpu": statistics.median(t[1] for t in runs)}
               for name, runs in times.items()}
    ratio = medians["update"]["wall"] / medians["check"]["wall"]
    if args.json:
        print(json.dumps({"profile": args.profile, "repeat": args.repeat,
                          "medians": medians, "update_over_check": ratio},
                         indent=2))
        return 0
    for name, label in (("check", "resolve --check"), ("update", "update")):
        m = medians[name]
        print(f"{label:>16}: {m['wall']:.3f} s wall, {m['cpu']:.3f} s CPU "
              f"(median of {args.repeat})")
    print(f"update / resolve --check: {ratio:.2f}x wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
