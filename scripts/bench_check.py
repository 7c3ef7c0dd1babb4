"""Measure what the native check reads and how long it takes, cold and warm.

    python scripts/bench_check.py                       # locks/pylock.pypi-cu130.toml
    python scripts/bench_check.py locks/pylock.blackwell-cu128.toml --json
    python scripts/bench_check.py --repeat 5 --whole    # beside whole reads
    python scripts/bench_check.py --repeat 5 --baseline PYTHON  # beside older code

Cold: an empty cache (a temporary folder), so every wheel is read from the index
by range requests (its central directory; the shared objects the check needs,
the larger ones in part). Warm: the same cache again, so nothing is read. Prints
wall time, CPU time, bytes read against the wheels' total size, and the wheels
that cost the most; with ``--repeat`` the medians (and each run's figures).
``--whole`` times, in the same run and alternating with it, the check reading
every member whole (``WheelReader(partial=None)``, the reads before partial
inflate) and says whether the two gave the same facts. ``--baseline PYTHON``
times, alternating, ``stacklock check LOCK`` on an empty cache as a command,
with this stacklock and with ``PYTHON -m stacklock.cli`` (the venv of an older
checkout, run outside any checkout), start-up included, and says whether the
two cached the same facts (a lock the check passes).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import stacklock_command, timed  # noqa: E402

from stacklock.http import make_http_client  # noqa: E402
from stacklock.lock import load_lock  # noqa: E402
from stacklock.native.lockcheck import check_lock_file, wheels_of  # noqa: E402


def _run(lock: Path, cache: Path, *, partial: bool = True) -> dict[str, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    with make_http_client() as http:
        report = check_lock_file(lock, http=http, cache_dir=cache, partial=partial)
    return {"seconds": round(time.perf_counter() - wall, 2),
            "cpu_seconds": round(time.process_time() - cpu, 2),
            "bytes_read": report.bytes_read, "requests": report.requests,
            "ok": report.ok, "wheels": report.wheels, "objects": report.objects,
            "by_wheel": report.bytes_by_wheel, "facts": _facts(cache)}


def _command_run(command: list[str], lock: Path) -> dict[str, object]:
    """``stacklock check LOCK --json`` as ``command`` runs it, on an empty
    cache, outside any checkout (``python -m`` puts the working directory
    first on sys.path)."""
    with tempfile.TemporaryDirectory() as tmp:
        out, cache = Path(tmp) / "check.json", Path(tmp) / "cache"
        env = {**os.environ, "STACKLOCK_CACHE_DIR": str(cache)}
        with out.open("wb") as fh:
            seconds, cpu = timed([*command, "check", str(lock.resolve()), "--json"],
                                 env=env, stdout=fh, cwd=tmp)
        printed = json.loads(out.read_text())
        return {"seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                "bytes_read": printed["bytes_read"], "requests": printed["requests"],
                "facts": _facts(cache)}


def _facts(cache: Path) -> str:
    """A digest of every facts entry the run cached (by wheel sha256)."""
    digest = hashlib.sha256()
    for entry in sorted((cache / "native").glob("*.json.gz")):
        digest.update(entry.name.encode() + gzip.decompress(entry.read_bytes()))
    return digest.hexdigest()


def _median(runs: list[dict[str, object]], key: str) -> float:
    return statistics.median(float(r[key]) for r in runs)  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", nargs="?", default=str(ROOT / "locks" /
                                                       "pylock.pypi-cu130.toml"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--whole", action="store_true",
                        help="also time the check reading every member whole")
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="also time `stacklock check` as a command, this "
                        "stacklock's and PYTHON -m stacklock.cli's")
    args = parser.parse_args()
    lock = Path(args.lock)
    wheels = wheels_of(load_lock(lock))
    native = [w for w in wheels if not w.filename.endswith("-none-any.whl")]
    sizes = {w.filename: w.size or 0 for w in native}
    kinds = ["partial", "whole"] if args.whole else ["partial"]
    commands = {"command": stacklock_command(),
                "baseline": [args.baseline, "-m", "stacklock.cli"]}
    if args.baseline:
        kinds += ["command", "baseline"]
    runs: dict[str, list[dict[str, object]]] = {k: [] for k in kinds}
    warm: dict[str, object] = {}
    load = os.getloadavg()[0]
    for rep in range(args.repeat):
        for kind in kinds if rep % 2 == 0 else reversed(kinds):
            if kind in commands:
                runs[kind].append(_command_run(commands[kind], lock))
                continue
            with tempfile.TemporaryDirectory() as tmp:
                runs[kind].append(_run(lock, Path(tmp), partial=kind == "partial"))
                if kind == "partial" and not warm:
                    warm = _run(lock, Path(tmp))
    result = {"lock": str(lock), "packages": len(wheels), "native_wheels": len(native),
              "native_wheel_bytes": sum(sizes.values()), "load_average": load,
              "cold": runs["partial"][0], "warm": warm,
              "medians": {kind: {key: _median(found, key) for key in (
                  "seconds", "cpu_seconds", "bytes_read", "requests")}
                  for kind, found in runs.items()},
              "runs": {kind: [{k: r[k] for k in ("seconds", "cpu_seconds",
                                                "bytes_read", "requests")}
                              for r in found] for kind, found in runs.items()}}
    if args.whole or args.baseline:
        result["same_facts"] = all(r["facts"] == runs["partial"][0]["facts"]
                                   for found in runs.values() for r in found)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    total = result["native_wheel_bytes"]
    cold = runs["partial"][0]
    print(f"{lock.name}: {len(wheels)} wheels, {len(native)} with a platform tag "
          f"({total / 1e9:.2f} GB), {cold['objects']} shared objects, load {load:.1f}")
    for kind, found in runs.items():
        med = result["medians"][kind]  # type: ignore[index]
        share = 100 * med["bytes_read"] / total
        print(f"  cold, {kind}, median of {len(found)}: {med['seconds']:.2f} s wall, "
              f"{med['cpu_seconds']:.2f} s CPU, {med['bytes_read'] / 1e6:.1f} MB read "
              f"in {med['requests']:.0f} requests ({share:.1f} % of the wheels)")
        print("    runs: " + ", ".join(f"{r['seconds']} s / {r['cpu_seconds']} s CPU"
                                      for r in found))
    print(f"  warm: {warm['seconds']} s wall, {warm['cpu_seconds']} s CPU, "
          f"{int(warm['bytes_read']) / 1e6:.1f} MB read")  # type: ignore[call-overload]
    if args.baseline:
        ratios = [_median(runs["command"], key) / _median(runs["baseline"], key)
                  for key in ("seconds", "cpu_seconds")]
        print(f"  stacklock check over the baseline's: wall {ratios[0]:.2f}, "
              f"CPU {ratios[1]:.2f}")
    if args.whole or args.baseline:
        print(f"  same facts in every run: {result['same_facts']}")
    by_wheel = cold["by_wheel"]
    assert isinstance(by_wheel, dict)
    print("  most bytes (read / wheel size):")
    for name, read in sorted(by_wheel.items(), key=lambda kv: -kv[1])[:8]:
        size = sizes.get(name, 0)
        print(f"    {read / 1e6:8.1f} / {size / 1e6:8.1f} MB  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
