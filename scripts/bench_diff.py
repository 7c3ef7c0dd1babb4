"""Time ``stacklock diff`` on two real ~600-package locks.

The locks are real resolutions, not replicated entries: ``uv pip compile --format
pylock.toml`` of one large requirement set (sglang 0.5.9 and torch 2.9.1 with
jupyterlab, airflow, ray, dask, mlflow, gradio, dagster, prefect, langchain, ...)
against real PyPI, once with ``--exclude-newer 2026-06-01`` and once with
``2026-12-01``: about 600 packages each, hundreds of them at other versions. uv
writes sdists and several wheels per package, so these files are larger than
stacklock's own locks (one wheel each): a harder case.

The locks are built once into ``<cache>/bench-diff/`` (needs PyPI, ~1 minute) and
reused. The time reported is the whole ``diff_lock_files`` call (read both files,
validate them with packaging.pylock, compare) plus rendering, best and median of
``--repeat`` runs.

    .venv/bin/python scripts/bench_diff.py [--repeat 7] [--dir PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from record_diff_locks import compile_args, find_uv

from stacklock._fs import cache_dir
from stacklock.diff import (
    diff_lock_files,
    render_json,
    render_markdown,
    render_text,
)

REQUIREMENTS = [
    "sglang==0.5.9",
    "torch==2.9.1",
    "jupyterlab",
    "apache-airflow[amazon,google,postgres,celery,cncf.kubernetes]",
    "ray[default,data,serve,tune]",
    "dask[complete]",
    "scikit-learn",
    "mlflow",
    "streamlit",
    "gradio",
    "dagster",
    "prefect",
    "langchain-community",
    "llama-index",
    "sphinx",
    "notebook",
    "pyspark",
    "openai-agents",
    "snowflake-connector-python",
    "playwright",
    "selenium",
    "scrapy",
    "django",
    "flask",
    "celery[redis]",
    "boto3",
    "keras",
    "moto[server]",
    "great-expectations",
]
CUTOFFS = {"old": "2026-06-01T00:00:00Z", "new": "2026-12-01T00:00:00Z"}
GOAL_S = 0.3


def build_locks(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.in").write_text("\n".join(REQUIREMENTS) + "\n")
    out = {}
    for name, cutoff in CUTOFFS.items():
        lock = folder / f"pylock.{name}.toml"
        out[name] = lock
        if lock.exists():
            continue
        args = [find_uv(), *compile_args(cutoff), "bench.in", "-o", lock.name]
        print("+ uv", " ".join(args[1:]), flush=True)
        subprocess.run(args, cwd=folder, check=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=cache_dir() / "bench-diff")
    args = parser.parse_args()
    locks = build_locks(args.dir)
    renderers = {"text": render_text, "markdown": render_markdown, "json": render_json}
    totals: list[float] = []
    renders: dict[str, list[float]] = {name: [] for name in renderers}
    for _ in range(args.repeat):
        start = time.perf_counter()
        diff = diff_lock_files(locks["old"], locks["new"])
        totals.append(time.perf_counter() - start)
        for name, render in renderers.items():
            start = time.perf_counter()
            render(diff)
            renders[name].append(time.perf_counter() - start)
    summary = diff.summary()
    print(
        f"locks: {summary['old-packages']} and {summary['new-packages']} packages; "
        f"{len(diff.packages)} changed, {summary['unchanged']} unchanged"
    )
    print(
        f"diff (read + validate + compare): best {min(totals):.3f} s, "
        f"median {statistics.median(totals):.3f} s over {args.repeat} runs "
        f"(goal < {GOAL_S} s)"
    )
    for name, times in renders.items():
        print(
            f"render {name}: best {min(times):.3f} s, "
            f"median {statistics.median(times):.3f} s"
        )
    return 0 if min(totals) < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
