"""Benchmark stacklock's resolver against ``uv pip compile`` on the same inputs.

For each requirement set, both tools resolve for CPython 3.12 on
x86_64-manylinux_2_28, as separate processes, cold (a fresh, empty cache directory
each) and warm (the cache the cold run left), alternating which tool goes first
from one repetition to the next. Prints, per set: whether the pins are identical
(and the differences), the median times, the ratios stacklock/uv, and the median
CPU time (user + system) of each tool, steadier than wall time on a busy machine,
and the load average before the first set.

    .venv/bin/python scripts/bench_resolve.py [--repeat 2] [--group everyday]
        [--set NAME] [--no-check] [--baseline PYTHON]

The sets live in scripts/resolve_sets.toml (groups "gpu", "everyday",
"application" and "moves": sets whose first choice does not load).
``--baseline PYTHON`` times a second stacklock (``PYTHON -m stacklock.cli``, e.g.
the venv of an older checkout, run outside any checkout) in the same run, beside
this one and uv, and prints this one's time over the baseline's.

Talks to real PyPI (https://pypi.org/simple); needs the ``uv`` next to the
interpreter or on PATH. uv runs with ``UV_PYTHON_DOWNLOADS=never``: where no
CPython 3.12 is installed it would otherwise spend seconds trying to download one
before resolving, which is not resolver time; a CPython 3.12 (``--uv-python PATH``,
else a working ``python3.12`` on PATH) is given as ``--python`` so uv spends no time
discovering interpreters, the target still being ``--python-version 3.12``.
stacklock runs with the flags a user runs (the native check included, work
uv does not do); ``--no-check`` measures the resolver alone. For each set it
also reports the bytes each phase took in on the cold run: the resolve phase's
index pages and METADATA (as cached), and the native check's wheel reads and
range requests (as it counts them); and the cold run's seconds by phase: start-up
(the interpreter, imports and exit: the wall time outside the command's own
clock), the resolve (resolution and lock) and the native check (as it times
itself, every round of it). ``STACKLOCK_NATIVE_FACTS`` in the environment goes
to stacklock as it is: the case of a second machine whose team shares the facts
(the caches stay empty, the check reads from that source).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from _bench import stacklock_command, timed, uv_binary
from _sets import MANYLINUX, PLATFORM, PYTHON, parse_pins, profile_text

import stacklock

GROUPS: dict[str, dict[str, list[str]]] = tomllib.loads(
    (Path(__file__).with_name("resolve_sets.toml")).read_text())
SETS = {name: reqs for group in GROUPS.values() for name, reqs in group.items()}
# vllm takes nvidia-cutlass-dsl, whose CUDA 12 libraries ride along with torch's
# CUDA 13: stacklock refuses such a mix unless the profile allows it (uv does not
# check), so the bench's profile allows it.
ALLOW_MIXED: dict[str, list[str]] = {
    name: ["nvidia-cutlass-dsl-libs-cu12"] for name in ("vllm", "pypi-cu130")}
UV_PYTHON: list[str] = []  # the interpreter given to uv as --python, if any
FLAGS: list[str] = []  # stacklock resolve's extra flags (--no-check)
BASELINE: list[str] = []  # the baseline stacklock's interpreter, if any
BYTES: list[dict[str, float]] = []  # per stacklock run: bytes and seconds per phase


def set_manylinux(tag: str) -> None:
    global MANYLINUX, PLATFORM
    MANYLINUX, PLATFORM = tag, f"x86_64-manylinux_{tag}"


def find_python(given: str | None) -> str | None:
    """The real path of a working CPython {PYTHON} (``given``, else on PATH); a
    pyenv shim that cannot run it gives None."""
    for path in (given, shutil.which(f"python{PYTHON}")):
        if not path:
            continue
        probe = subprocess.run([path, "-c", "import sys; print(sys.executable)"],
                               capture_output=True, text=True, check=False)
        if probe.returncode == 0 and probe.stdout.strip():
            return probe.stdout.strip()
    return None


def run_uv(reqs: list[str], cache: Path, work: Path, _allow: list[str]
           ) -> tuple[float, float, dict[str, str]]:
    infile, outfile = work / "requirements.in", work / "uv.txt"
    infile.write_text("\n".join(reqs) + "\n")
    interpreter = UV_PYTHON[0] if UV_PYTHON else None
    cmd = [uv_binary(), "pip", "compile", str(infile), "--python-version", PYTHON,
           "--python-platform", PLATFORM, "--cache-dir", str(cache), "--no-header",
           "--quiet", "-o", str(outfile),
           *(["--python", interpreter] if interpreter else [])]
    # Without an installed 3.12, uv would first try (and here fail, with retries)
    # to download one; it resolves for --python-version without it.
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    seconds, cpu = timed(cmd, env=env)
    return seconds, cpu, parse_pins(outfile.read_text())


def run_stacklock(reqs: list[str], cache: Path, work: Path, allow: list[str],
                  command: list[str] | None = None
                  ) -> tuple[float, float, dict[str, str]]:
    profile = work / "bench.toml"
    profile.write_text(profile_text(reqs, allow_mixed=allow, manylinux=MANYLINUX))
    out = work / "pylock.bench.toml"
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(cache)}
    report = work / "resolve.json"
    before = _cached_bytes(cache)
    # cwd: `python -m` puts the working directory first on sys.path, so from a
    # checkout's root the baseline's interpreter would import that checkout
    with report.open("wb") as fh:
        seconds, cpu = timed([*(command or stacklock_command()), "resolve",
                              str(profile), "-o", str(out), "--json", *FLAGS],
                             env=env, stdout=fh, cwd=work)
    if command is None:  # this stacklock: the bytes each phase took in
        printed = json.loads(report.read_text() or "{}")
        native = printed.get("native") or {}
        fresh = not printed.get("replayed")  # a replay reads 0
        inside = float(printed.get("seconds", 0.0))  # the command's own work
        check = float(native.get("seconds", 0.0)) if fresh else 0.0
        BYTES.append({"resolve": _cached_bytes(cache) - before,
                      "check": int(native.get("bytes_read", 0)) if fresh else 0,
                      "requests": int(native.get("requests", 0)) if fresh else 0,
                      # seconds per phase: the interpreter, imports and exit;
                      # the resolution and the lock; the native check
                      "start-up": max(seconds - inside, 0.0),
                      "resolve-seconds": max(inside - check, 0.0),
                      "check-seconds": check})
    data = tomllib.loads(out.read_text())
    return seconds, cpu, {p["name"]: p["version"] for p in data["packages"]}


def _cached_bytes(cache: Path) -> int:
    """Bytes of index pages and METADATA in the cache: what the resolve phase
    took in (the native check's reads are counted by the check itself)."""
    return sum(f.stat().st_size for part in ("pages", "metadata")
               for f in (cache / part).rglob("*") if f.is_file())


def diff(ours: dict[str, str], uv: dict[str, str]) -> list[str]:
    out = []
    for name in sorted(set(ours) | set(uv)):
        if ours.get(name) != uv.get(name):
            out.append(f"{name}: stacklock {ours.get(name, '-')}, "
                       f"uv {uv.get(name, '-')}")
    return out


def run_baseline(reqs: list[str], cache: Path, work: Path, allow: list[str]
                 ) -> tuple[float, float, dict[str, str]]:
    return run_stacklock(reqs, cache, work, allow,
                         command=[BASELINE[0], "-m", "stacklock.cli"])


def bench(name: str, reqs: list[str], repeat: int) -> dict[str, object]:
    tools = {"uv": run_uv, "sl": run_stacklock}
    if BASELINE:
        tools["base"] = run_baseline
    kinds = [f"{t}-{phase}" for phase in ("cold", "warm") for t in tools]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    cpus: dict[str, list[float]] = {k: [] for k in kinds}
    pins: dict[str, dict[str, str]] = {}
    allow = ALLOW_MIXED.get(name, [])
    cold_bytes: list[dict[str, float]] = []
    for rep in range(repeat):
        order = list(tools) if rep % 2 == 0 else list(reversed(tools))
        with tempfile.TemporaryDirectory(prefix="bench-resolve-") as tmp:
            root = Path(tmp)
            for tool in order:
                (root / tool).mkdir()
                seconds, cpu, found = tools[tool](reqs, root / f"{tool}-cache",
                                                  root / tool, allow)
                if tool == "sl":
                    cold_bytes.append(BYTES[-1])
                times[f"{tool}-cold"].append(seconds)
                cpus[f"{tool}-cold"].append(cpu)
                pins[tool] = found
            for tool in order:
                seconds, cpu, found = tools[tool](reqs, root / f"{tool}-cache",
                                                  root / tool, allow)
                times[f"{tool}-warm"].append(seconds)
                cpus[f"{tool}-warm"].append(cpu)
    med = {k: statistics.median(v) for k, v in times.items()}
    differences = diff(pins["sl"], pins["uv"])
    extra = {} if not BASELINE else {
        "baseline-cold-ratio": round(med["base-cold"] / med["uv-cold"], 2),
        "baseline-warm-ratio": round(med["base-warm"] / med["uv-warm"], 2),
        # this stacklock's time over the baseline's (below 1: faster now)
        "over-baseline-cold": round(med["sl-cold"] / med["base-cold"], 2),
        "over-baseline-warm": round(med["sl-warm"] / med["base-warm"], 2),
        "over-baseline-cpu-cold": round(statistics.median(cpus["sl-cold"])
                                        / statistics.median(cpus["base-cold"]), 2),
        "over-baseline-cpu-warm": round(statistics.median(cpus["sl-warm"])
                                        / statistics.median(cpus["base-warm"]), 2)}
    return {**extra,
        "set": name, "requirements": reqs, "packages": len(pins["sl"]),
        "identical": not differences, "differences": differences,
        "seconds": {k: round(v, 2) for k, v in med.items()},
        "all-seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "cpu-seconds": {k: round(statistics.median(v), 2) for k, v in cpus.items()},
        "cold-bytes-mb": {phase: round(statistics.median(
            b[phase] for b in cold_bytes) / 1e6, 1) for phase in ("resolve", "check")},
        "cold-check-requests": statistics.median(b["requests"] for b in cold_bytes),
        "cold-phase-seconds": {phase: round(statistics.median(
            b[f"{phase}-seconds" if phase != "start-up" else phase]
            for b in cold_bytes), 2) for phase in ("start-up", "resolve", "check")},
        "warm-check-bytes-mb": round(BYTES[-1]["check"] / 1e6, 1),
        "cold-ratio": round(med["sl-cold"] / med["uv-cold"], 2),
        "warm-ratio": round(med["sl-warm"] / med["uv-warm"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--set", action="append", choices=sorted(SETS))
    parser.add_argument("--group", choices=sorted(GROUPS),
                        help="the sets of one group of scripts/resolve_sets.toml")
    parser.add_argument("--no-check", action="store_true",
                        help="resolve with --no-check (the resolver alone)")
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="also time PYTHON -m stacklock.cli (an older checkout)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--uv-python", metavar="PATH",
                        help=f"a CPython {PYTHON} for uv's --python")
    parser.add_argument("--manylinux", default=MANYLINUX, metavar="2_34",
                        help="the target's glibc (pypi-cu130's sglang needs 2_34)")
    args = parser.parse_args(argv)
    set_manylinux(args.manylinux)
    found = find_python(args.uv_python)
    UV_PYTHON[:] = [found] if found else []
    FLAGS[:] = ["--no-check"] if args.no_check else []
    BASELINE[:] = [args.baseline] if args.baseline else []
    # stacklock's modules as bytecode, as after any first run (Python writes it
    # on import unless PYTHONDONTWRITEBYTECODE is set): compiling ~100 modules
    # at every start is not resolver time
    compileall.compile_dir(str(Path(stacklock.__file__).parent), quiet=1)
    load = os.getloadavg()
    names = args.set or list(GROUPS[args.group] if args.group else SETS)
    results = [bench(n, SETS[n], args.repeat) for n in names]
    # stacklock is Python: its CPU time follows the interpreter's build (a
    # CPython built without PGO/LTO, as pyenv builds by default, runs it ~30%
    # slower than a distribution's), so the report names the interpreter
    interpreter = f"{sys.executable} (CPython {platform.python_version()})"
    if args.json:
        print(json.dumps({"load-average": load, "stacklock-python": interpreter,
                          "sets": results}, indent=2))
        return 0
    print("load average before: " + " ".join(f"{x:.2f}" for x in load)
          + f"; stacklock runs on {interpreter}; uv --python {found or '(not given)'}")
    for r in results:
        s = r["seconds"]
        assert isinstance(s, dict)
        print(f"{r['set']}: {r['packages']} packages, identical pins: "
              f"{'yes' if r['identical'] else 'no'}")
        for line in r["differences"]:  # type: ignore[attr-defined]
            print(f"    {line}")
        print(f"    cold: stacklock {s['sl-cold']:.2f} s, uv {s['uv-cold']:.2f} s, "
              f"ratio {r['cold-ratio']}")
        if BASELINE:
            print(f"    baseline: cold {s['base-cold']:.2f} s (ratio "
                  f"{r['baseline-cold-ratio']}), warm {s['base-warm']:.2f} s (ratio "
                  f"{r['baseline-warm-ratio']}); this over the baseline: cold "
                  f"{r['over-baseline-cold']}, warm {r['over-baseline-warm']}; CPU "
                  f"cold {r['over-baseline-cpu-cold']}, warm "
                  f"{r['over-baseline-cpu-warm']}")
        print(f"    warm: stacklock {s['sl-warm']:.2f} s, uv {s['uv-warm']:.2f} s, "
              f"ratio {r['warm-ratio']}")
        b = r["cold-bytes-mb"]
        assert isinstance(b, dict)
        print(f"    bytes taken in, cold: resolve {b['resolve']} MB (pages and "
              f"METADATA), native check {b['check']} MB in "
              f"{r['cold-check-requests']:g} requests; warm check "
              f"{r['warm-check-bytes-mb']} MB")
        p = r["cold-phase-seconds"]
        assert isinstance(p, dict)
        print(f"    stacklock's cold seconds by phase: start-up and exit "
              f"{p['start-up']:.2f} s, resolve {p['resolve']:.2f} s, native check "
              f"{p['check']:.2f} s")
        c = r["cpu-seconds"]
        assert isinstance(c, dict)
        print(f"    cpu (user+system): cold stacklock {c['sl-cold']:.2f} s, uv "
              f"{c['uv-cold']:.2f} s; warm stacklock {c['sl-warm']:.2f} s, uv "
              f"{c['uv-warm']:.2f} s")
    cold = [float(r["cold-ratio"]) for r in results]  # type: ignore[arg-type]
    warm = [float(r["warm-ratio"]) for r in results]  # type: ignore[arg-type]
    if BASELINE:
        base = [float(r["baseline-cold-ratio"]) for r in results]  # type: ignore[arg-type]
        print(f"baseline cold ratio: median {statistics.median(base):.2f}, worst "
              f"{max(base):.2f}")
        for what in ("", "cpu-"):
            over = [float(r[f"over-baseline-{what}{phase}"])  # type: ignore[arg-type]
                    for r in results for phase in ("cold", "warm")]
            print(f"this over the baseline, {'CPU' if what else 'wall'} (cold and "
                  f"warm): median {statistics.median(over):.2f}, worst "
                  f"{max(over):.2f}")
    print(f"flags: {' '.join(FLAGS) or '(defaults)'}")
    print(f"cold ratio: median {statistics.median(cold):.2f}, worst {max(cold):.2f}; "
          f"warm ratio: median {statistics.median(warm):.2f}, worst {max(warm):.2f}; "
          f"pins identical on {sum(bool(r['identical']) for r in results)} of "
          f"{len(results)} sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
