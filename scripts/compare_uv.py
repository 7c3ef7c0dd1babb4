"""Held-out check: stacklock against ``uv pip compile`` on real requirement sets.

Each set (default: every requirements file in tests/data/requirement-sets/, taken
from public repositories; ``--group`` for scripts/resolve_sets.toml) is resolved by
both tools for CPython 3.12 on x86_64 manylinux_2_28, as of one moment
(``--exclude-newer``, so the answer does not move with PyPI). Verdicts:

- identical: the same pins (or both refuse the set);
- valid alternative: other pins, which uv accepts: ``uv pip compile`` of the set
  plus every stacklock pin as ``==`` gives exactly those pins (uv checked every
  requirement between them); with ``--install`` also: the lock installs with
  ``uv pip sync`` into a fresh CPython 3.12 venv where ``uv pip check`` is clean;
- wrong: stacklock refuses a set uv locks, or uv rejects its pins, or its lock does
  not install or check.

    .venv/bin/python scripts/compare_uv.py [--set NAME ...] [--install]
        [--record] [--json]

``--record`` writes uv's answer for each set to
tests/data/requirement-sets/uv/NAME.txt (its pins, or its error), which the
offline tests check against the sets. Talks to real PyPI; needs a CPython 3.12
for ``--install`` (``--python PATH``, else ``python3.12`` on PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from _bench import stacklock_command, uv_binary
from _sets import SETS, RequirementSet, parse_pins, profile_text, read_sets

RESOLVE_SETS = Path(__file__).with_name("resolve_sets.toml")
EXCLUDE_NEWER = "2026-12-01T00:00:00Z"
UV_ENV = {**os.environ, "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}


def run_uv(reqs: tuple[str, ...], work: Path, cutoff: str) -> tuple[bool, str]:
    """(locked, uv's output: the pins, else its error)."""
    infile = work / "requirements.in"
    infile.write_text("\n".join(reqs) + "\n")
    proc = subprocess.run(
        [uv_binary(), "pip", "compile", str(infile), "--python-version", "3.12",
         "--python-platform", "x86_64-manylinux_2_28", "--exclude-newer", cutoff,
         "--no-header", "--no-annotate", "--quiet", "--cache-dir",
         str(work.parent / "uv-cache")],
        capture_output=True, text=True, env=UV_ENV, check=False)
    if proc.returncode == 0:
        return True, proc.stdout
    return False, _last_line(proc.stderr)


def run_stacklock(reqs: tuple[str, ...], work: Path, cutoff: str
                  ) -> tuple[bool, str, Path]:
    """(locked, the lock's pins as name==version lines, else the error; the
    lock)."""
    profile = work / "set.toml"
    profile.write_text(profile_text(reqs, exclude_newer=cutoff))
    lock = work / "pylock.set.toml"
    proc = subprocess.run(
        [*stacklock_command(), "resolve", str(profile), "-o", str(lock), "--no-check"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "STACKLOCK_CACHE_DIR": str(work.parent / "sl-cache")})
    if proc.returncode != 0:  # its first line says what; the rest, what to try
        first = proc.stderr.strip().splitlines()[:1] or ["(no output)"]
        return False, first[0].removeprefix("stacklock: error: ")[:300], lock
    data = tomllib.loads(lock.read_text())
    pins = "".join(f"{p['name']}=={p['version']}\n" for p in data["packages"]
                   if "version" in p)
    return True, pins, lock


def uv_accepts(reqs: tuple[str, ...], pins: dict[str, str], work: Path,
               cutoff: str) -> tuple[bool, str]:
    """Whether uv resolves the set with stacklock's pins to exactly those pins."""
    fixed = tuple(f"{name}=={version}" for name, version in sorted(pins.items()))
    ok, out = run_uv((*reqs, *fixed), work, cutoff)
    if not ok:
        return False, f"uv rejects stacklock's pins: {out}"
    extra = sorted(set(parse_pins(out)) - set(pins))
    if extra:
        return False, f"uv adds {', '.join(extra)} to stacklock's pins"
    return True, "uv pip compile accepts its pins"


def installs(lock: Path, work: Path, python: str) -> tuple[bool, str]:
    """Whether the lock installs with uv pip sync and uv pip check is clean (the
    wheels come through uv's own cache: a second run fetches nothing)."""
    venv = work / "venv"
    inside = str(venv / "bin" / "python")
    steps = [[uv_binary(), "venv", "-q", "-p", python, str(venv)],
             [uv_binary(), "pip", "sync", "-q", "--python", inside, str(lock)],
             [uv_binary(), "pip", "check", "--python", inside]]
    try:
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=UV_ENV,
                                  check=False)
            if proc.returncode != 0:
                return False, f"{cmd[1]} {cmd[2]}: " + _last_line(
                    proc.stderr + proc.stdout)
        return True, "uv pip sync and uv pip check pass"
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def compare(item: RequirementSet, root: Path, *, cutoff: str, python: str | None,
            record: bool) -> dict[str, object]:
    work = root / item.name
    work.mkdir(parents=True)
    uv_ok, uv_out = run_uv(item.requirements, work, cutoff)
    sl_ok, sl_out, lock = run_stacklock(item.requirements, work, cutoff)
    if record:
        out = SETS / "uv" / f"{item.name}.txt"
        out.parent.mkdir(exist_ok=True)
        out.write_text(uv_out if uv_ok else f"# uv error: {uv_out}\n")
    uv_pins = parse_pins(uv_out) if uv_ok else {}
    sl_pins = parse_pins(sl_out) if sl_ok else {}
    differences = [f"{n}: stacklock {sl_pins.get(n, '-')}, uv {uv_pins.get(n, '-')}"
                   for n in sorted(set(uv_pins) | set(sl_pins))
                   if uv_pins.get(n) != sl_pins.get(n)]
    if not uv_ok and not sl_ok:
        verdict, why = "identical", f"both refuse (stacklock: {sl_out})"
    elif sl_ok and uv_ok and not differences:
        verdict, why = "identical", f"{len(sl_pins)} pins"
    elif not sl_ok:
        verdict, why = "wrong", f"stacklock refuses what uv locks: {sl_out}"
    else:
        ok, why = uv_accepts(item.requirements, sl_pins, work, cutoff)
        if ok and python is not None:
            ok, why = installs(lock, work, python)
        verdict = "valid alternative" if ok else "wrong"
        if not uv_ok:
            why = f"uv refuses ({uv_out}); stacklock's lock: {why}"
    return {"set": item.name, "source": item.source, "verdict": verdict,
            "why": why, "differences": differences,
            "left-out": [f"{line} ({reason})" for line, reason in item.left_out]}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _find_python(given: str | None) -> str | None:
    for path in (given, shutil.which("python3.12")):
        if path and subprocess.run([path, "-c", "import sys; assert sys.version_info"
                                    "[:2] == (3, 12)"], capture_output=True,
                                   check=False).returncode == 0:
            return path
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", metavar="NAME")
    parser.add_argument("--group", help="a group of scripts/resolve_sets.toml "
                        "instead of the requirement files")
    parser.add_argument("--exclude-newer", default=EXCLUDE_NEWER)
    parser.add_argument("--install", action="store_true",
                        help="install the locks that differ (uv pip sync + check)")
    parser.add_argument("--python", help="a CPython 3.12 for --install")
    parser.add_argument("--record", action="store_true",
                        help="write uv's answers to tests/data/requirement-sets/uv/")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.group:
        groups = tomllib.loads(RESOLVE_SETS.read_text())
        sets = [RequirementSet(name=n, requirements=tuple(r),
                               source=f"scripts/resolve_sets.toml [{args.group}]")
                for n, r in groups[args.group].items()]
    else:
        sets = read_sets()
    if args.set:
        sets = [s for s in sets if s.name in args.set]
    python = None
    if args.install:
        python = _find_python(args.python)
        if python is None:
            parser.error("--install needs a CPython 3.12 (--python PATH)")
    with tempfile.TemporaryDirectory(prefix="compare-uv-") as tmp:
        results = [compare(s, Path(tmp), cutoff=args.exclude_newer, python=python,
                           record=args.record) for s in sets]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        print(f"{r['set']}: {r['verdict']} ({r['why']})")
        for line in [*r["differences"], *r["left-out"]]:  # type: ignore[misc]
            print(f"    {line}")
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r["verdict"])] = counts.get(str(r["verdict"]), 0) + 1
    print(f"{len(results)} sets (as of {args.exclude_newer}): "
          + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
