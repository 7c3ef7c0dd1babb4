"""Measure what the native check reads and how long it takes, cold and warm.

    python scripts/bench_check.py                       # locks/pylock.pypi-cu130.toml
    python scripts/bench_check.py locks/pylock.blackwell-cu128.toml --json

Cold: an empty cache (a temporary folder), so every wheel is read from the index
by range requests (its central directory; the shared objects the check needs).
Warm: the same cache again, so nothing is read. Prints wall time, CPU time,
bytes read against the wheels' total size, and the wheels that cost the most.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklock.http import make_http_client  # noqa: E402
from stacklock.lock import load_lock  # noqa: E402
from stacklock.native.lockcheck import check_lock_file, wheels_of  # noqa: E402


def _run(lock: Path, cache: Path) -> dict[str, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    with make_http_client() as http:
        report = check_lock_file(lock, http=http, cache_dir=cache)
    return {"seconds": round(time.perf_counter() - wall, 1),
            "cpu_seconds": round(time.process_time() - cpu, 1),
            "bytes_read": report.bytes_read, "ok": report.ok,
            "wheels": report.wheels, "objects": report.objects,
            "by_wheel": report.bytes_by_wheel}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", nargs="?", default=str(ROOT / "locks" /
                                                       "pylock.pypi-cu130.toml"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lock = Path(args.lock)
    wheels = wheels_of(load_lock(lock))
    native = [w for w in wheels if not w.filename.endswith("-none-any.whl")]
    sizes = {w.filename: w.size or 0 for w in native}
    with tempfile.TemporaryDirectory() as tmp:
        cold = _run(lock, Path(tmp))
        warm = _run(lock, Path(tmp))
    result = {"lock": str(lock), "packages": len(wheels), "native_wheels": len(native),
              "native_wheel_bytes": sum(sizes.values()), "cold": cold, "warm": warm}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    total = result["native_wheel_bytes"]
    print(f"{lock.name}: {len(wheels)} wheels, {len(native)} with a platform tag "
          f"({total / 1e9:.2f} GB), {cold['objects']} shared objects")
    for name, run in (("cold", cold), ("warm", warm)):
        read = int(run["bytes_read"])  # type: ignore[call-overload]
        print(f"  {name}: {run['seconds']} s wall, {run['cpu_seconds']} s CPU, "
              f"{read / 1e6:.1f} MB read ({100 * read / total:.0f} % of the wheels)")
    by_wheel = cold["by_wheel"]
    assert isinstance(by_wheel, dict)
    print("  most bytes (read / wheel size):")
    for name, read in sorted(by_wheel.items(), key=lambda kv: -kv[1])[:8]:
        size = sizes.get(name, 0)
        print(f"    {read / 1e6:8.1f} / {size / 1e6:8.1f} MB  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
