"""Benchmark stacklock's resolver against ``uv pip compile`` on the same inputs.

For each requirement set, both tools resolve for CPython 3.12 on
x86_64-manylinux_2_28, as separate processes, cold (a fresh, empty cache directory
each) and warm (the cache the cold run left), alternating which tool goes first
from one repetition to the next. Prints, per set: whether the pins are identical
(and the differences), the median times, the ratios stacklock/uv, and the median
CPU time (user + system) of each tool, steadier than wall time on a busy machine.

    .venv/bin/python scripts/bench_resolve.py [--repeat 2] [--set NAME]

Talks to real PyPI (https://pypi.org/simple); needs the ``uv`` next to the
interpreter or on PATH. uv runs with ``UV_PYTHON_DOWNLOADS=never``: where no
CPython 3.12 is installed it would otherwise spend seconds trying to download one
before resolving, which is not resolver time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from _bench import stacklock_command, timed, uv_binary
from packaging.utils import canonicalize_name

SETS: dict[str, list[str]] = {
    "sglang-0.5.9": ["sglang==0.5.9"],
    "cuda13-torch-2.11": ["torch==2.11.0", "torchvision", "torchaudio"],
    "vllm": ["vllm"],
    "transformers-accelerate-torch": ["transformers", "accelerate", "torch"],
    "jax-cuda13": ["jax[cuda13]"],
    "torch-vision-audio": ["torch", "torchvision", "torchaudio"],
}
PYTHON, PLATFORM, MANYLINUX = "3.12", "x86_64-manylinux_2_28", "2_28"


def run_uv(reqs: list[str], cache: Path, work: Path
           ) -> tuple[float, float, dict[str, str]]:
    infile, outfile = work / "requirements.in", work / "uv.txt"
    infile.write_text("\n".join(reqs) + "\n")
    cmd = [uv_binary(), "pip", "compile", str(infile), "--python-version", PYTHON,
           "--python-platform", PLATFORM, "--cache-dir", str(cache), "--no-header",
           "--quiet", "-o", str(outfile)]
    # Without an installed 3.12, uv would first try (and here fail, with retries)
    # to download one; it resolves for --python-version without it.
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    seconds, cpu = timed(cmd, env=env)
    pins: dict[str, str] = {}
    for line in outfile.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonicalize_name(name.split("[")[0])] = version.strip()
    return seconds, cpu, pins


def run_stacklock(reqs: list[str], cache: Path, work: Path
                  ) -> tuple[float, float, dict[str, str]]:
    profile = work / "bench.toml"
    quoted = ", ".join(json.dumps(r) for r in reqs)
    profile.write_text(
        "[profile]\ndescription = \"bench\"\n[target]\n"
        f"python = \"{PYTHON}\"\nplatform = \"linux_x86_64\"\n"
        f"manylinux = \"{MANYLINUX}\"\n[requirements]\npackages = [{quoted}]\n")
    out = work / "pylock.bench.toml"
    env = {**os.environ, "STACKLOCK_CACHE_DIR": str(cache)}
    seconds, cpu = timed([*stacklock_command(), "resolve", str(profile), "-o", str(out),
                           "--json"], env=env, stdout=subprocess.DEVNULL)
    data = tomllib.loads(out.read_text())
    return seconds, cpu, {p["name"]: p["version"] for p in data["packages"]}


def diff(ours: dict[str, str], uv: dict[str, str]) -> list[str]:
    out = []
    for name in sorted(set(ours) | set(uv)):
        if ours.get(name) != uv.get(name):
            out.append(f"{name}: stacklock {ours.get(name, '-')}, "
                       f"uv {uv.get(name, '-')}")
    return out


def bench(name: str, reqs: list[str], repeat: int) -> dict[str, object]:
    kinds = ("uv-cold", "sl-cold", "uv-warm", "sl-warm")
    times: dict[str, list[float]] = {k: [] for k in kinds}
    cpus: dict[str, list[float]] = {k: [] for k in kinds}
    pins: dict[str, dict[str, str]] = {}
    tools = {"uv": run_uv, "sl": run_stacklock}
    for rep in range(repeat):
        order = ["uv", "sl"] if rep % 2 == 0 else ["sl", "uv"]
        with tempfile.TemporaryDirectory(prefix="bench-resolve-") as tmp:
            root = Path(tmp)
            for tool in order:
                (root / tool).mkdir()
                seconds, cpu, found = tools[tool](reqs, root / f"{tool}-cache",
                                                  root / tool)
                times[f"{tool}-cold"].append(seconds)
                cpus[f"{tool}-cold"].append(cpu)
                pins[tool] = found
            for tool in order:
                seconds, cpu, found = tools[tool](reqs, root / f"{tool}-cache",
                                                  root / tool)
                times[f"{tool}-warm"].append(seconds)
                cpus[f"{tool}-warm"].append(cpu)
    med = {k: statistics.median(v) for k, v in times.items()}
    differences = diff(pins["sl"], pins["uv"])
    return {
        "set": name, "requirements": reqs, "packages": len(pins["sl"]),
        "identical": not differences, "differences": differences,
        "seconds": {k: round(v, 2) for k, v in med.items()},
        "all-seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "cpu-seconds": {k: round(statistics.median(v), 2) for k, v in cpus.items()},
        "cold-ratio": round(med["sl-cold"] / med["uv-cold"], 2),
        "warm-ratio": round(med["sl-warm"] / med["uv-warm"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--set", action="append", choices=sorted(SETS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = [bench(n, SETS[n], args.repeat) for n in (args.set or list(SETS))]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        s = r["seconds"]
        assert isinstance(s, dict)
        print(f"{r['set']}: {r['packages']} packages, identical pins: "
              f"{'yes' if r['identical'] else 'no'}")
        for line in r["differences"]:  # type: ignore[attr-defined]
            print(f"    {line}")
        print(f"    cold: stacklock {s['sl-cold']:.2f} s, uv {s['uv-cold']:.2f} s, "
              f"ratio {r['cold-ratio']}")
        print(f"    warm: stacklock {s['sl-warm']:.2f} s, uv {s['uv-warm']:.2f} s, "
              f"ratio {r['warm-ratio']}")
        c = r["cpu-seconds"]
        assert isinstance(c, dict)
        print(f"    cpu (user+system): cold stacklock {c['sl-cold']:.2f} s, uv "
              f"{c['uv-cold']:.2f} s; warm stacklock {c['sl-warm']:.2f} s, uv "
              f"{c['uv-warm']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
