"""GPU probes: run ``_probe_script.py`` with the target venv's python.

The script needs only torch, so the venv under test never needs stacklock. The
benchmark runs one process per GPU (no torchrun): each rank joins an NCCL group over
``tcp://127.0.0.1:<free port>``; the slowest rank's time is the one reported, since a
tensor-parallel step waits for it. With one GPU the all-reduce is skipped, with that
reason: a one-rank collective moves nothing and would time an empty launch. Ranks
write to files, not pipes, and are waited on together, so a rank that writes a lot
never blocks inside a collective; when one rank fails, the others are stopped soon
after instead of waiting in the collective until the timeout.

NVLink multicast is switched off in every probe's environment (``NO_MULTICAST``),
whatever the caller's says: the probes are ours, and multicast can take a shared
host's GPUs out of service. The serving engine is not a probe: the gate leaves its
environment as the machine has it unless the profile says otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacklock.bounded import Malformed, parse_json
from stacklock.errors import ValidateError
from stacklock.runner import free_port
from stacklock.validation import DEFAULT_SIZES, KB, NO_MULTICAST, parse_size

__all__ = [
    "DEFAULT_SIZES",
    "NO_MULTICAST",
    "PROBE_SCRIPT",
    "AllReduceRow",
    "ProbeResult",
    "format_size",
    "last_json",
    "parse_size",
    "probe_env",
    "read_venv_info",
    "run_gpu_probes",
]

PROBE_SCRIPT = Path(__file__).resolve().parent / "_probe_script.py"
def format_size(size: int) -> str:
    if size >= KB * KB and size % (KB * KB) == 0:
        return f"{size // (KB * KB)} MB"
    if size >= KB and size % KB == 0:
        return f"{size // KB} KB"
    return f"{size} B"


def probe_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every probe (not of the serving engine): multicast off."""
    env = dict(os.environ if base is None else base)
    env.update(NO_MULTICAST)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = parse_json(line)
            except Malformed:
                continue
            if isinstance(data, dict):
                return data
    return None


def read_venv_info(python: Path, *, timeout: float = 300.0) -> dict[str, Any]:
    """torch, CUDA, NCCL and GPU facts as the venv's own python sees them."""
    try:
        proc = subprocess.run(
            [str(python), str(PROBE_SCRIPT), "info"], capture_output=True,
            text=True, errors="replace", timeout=timeout, env=probe_env(),
            check=False,
        )
    except FileNotFoundError as exc:
        raise ValidateError(f"venv python {python} does not exist",
                            hint="pass --venv DIR or --python PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise ValidateError(f"{python} {PROBE_SCRIPT.name} info ran over "
                            f"{timeout:.0f} s") from exc
    data = last_json(proc.stdout)
    if data is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        data = {"error": f"probe exited {proc.returncode}: {tail[0]}"}
    return data


@dataclass(frozen=True, kw_only=True)
class AllReduceRow:
    bytes: int
    eager_us: float          # slowest rank, launch overhead included
    graph_us: float | None   # slowest rank, inside a CUDA graph (no launch overhead)
    busbw_gbps: float | None  # NCCL's bus bandwidth; None for one GPU (no bus)

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "size": format_size(self.bytes),
                "eager_us": round(self.eager_us, 2),
                "graph_us": None if self.graph_us is None else round(self.graph_us, 2),
                "busbw_gbps": None if self.busbw_gbps is None
                else round(self.busbw_gbps, 3)}


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    world: int
    allreduce: tuple[AllReduceRow, ...] = ()
    allreduce_correct: bool = False
    allreduce_skipped: str | None = None    # why no all-reduce was timed
    matmul_n: int = 0
    matmul_tflops: tuple[float, ...] = ()   # one per rank
    devices: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    ranks: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    def row(self, size: int) -> AllReduceRow | None:
        return next((r for r in self.allreduce if r.bytes == size), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "devices": list(self.devices),
            "allreduce_correct": self.allreduce_correct,
            "allreduce_skipped": self.allreduce_skipped,
            "allreduce": [r.to_dict() for r in self.allreduce],
            "matmul_n": self.matmul_n,
            "matmul_tflops": [round(t, 1) for t in self.matmul_tflops],
            "errors": list(self.errors),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        rows = tuple(
            AllReduceRow(bytes=int(r["bytes"]), eager_us=float(r["eager_us"]),
                         graph_us=None if r.get("graph_us") is None
                         else float(r["graph_us"]),
                         busbw_gbps=None if r.get("busbw_gbps") is None
                         else float(r["busbw_gbps"]))
            for r in data.get("allreduce", [])
        )
        return cls(world=int(data["world"]), allreduce=rows,
                   allreduce_correct=bool(data.get("allreduce_correct")),
                   allreduce_skipped=data.get("allreduce_skipped"),
                   matmul_n=int(data.get("matmul_n", 0)),
                   matmul_tflops=tuple(float(t) for t in data.get("matmul_tflops", [])),
                   devices=tuple(data.get("devices", [])),
                   errors=tuple(data.get("errors", [])))


ONE_GPU = ("1 GPU: an all-reduce needs 2 or more (on one rank NCCL moves nothing, "
           "so the time would be an empty launch, not a measurement)")


def _merge_rows(world: int, good: list[dict[str, Any]],
                errors: list[str]) -> list[AllReduceRow]:
    rows: list[AllReduceRow] = []
    for i, first in enumerate(good[0]["allreduce"]):
        size = int(first["bytes"])
        eager = max(float(r["allreduce"][i]["eager_us"]) for r in good)
        graphs = [r["allreduce"][i].get("graph_us") for r in good]
        graph = max(float(g) for g in graphs) if None not in graphs else None
        best = graph if graph is not None else eager
        busbw = (size / (best * 1e-6) * 2.0 * (world - 1) / world / 1e9
                 if best > 0 else None)
        rows.append(AllReduceRow(bytes=size, eager_us=eager, graph_us=graph,
                                 busbw_gbps=busbw))
        for r in good:
            row = r["allreduce"][i]
            if row.get("graph_error"):
                errors.append(f"rank {r['rank']} {format_size(size)}: "
                              f"{row['graph_error']}")
            if row.get("finite") is False:
                errors.append(f"rank {r['rank']} {format_size(size)}: the reduced "
                              "tensor is no longer finite")
    return rows


def _merge(world: int, ranks: list[dict[str, Any]], errors: list[str]) -> ProbeResult:
    good = [r for r in ranks if "error" not in r]
    complete = bool(good) and len(good) == world
    timed = complete and world >= 2 and all("allreduce" in r for r in good)
    rows = _merge_rows(world, good, errors) if timed else []
    finite = not any(e.endswith("no longer finite") for e in errors)
    tflops = tuple(float(r["matmul_tflops"]) for r in good if "matmul_tflops" in r)
    return ProbeResult(
        world=world, allreduce=tuple(rows),
        allreduce_correct=timed and finite
        and all(r.get("allreduce_correct") for r in good),
        allreduce_skipped=ONE_GPU if world < 2 else None,
        matmul_n=int(good[0].get("matmul_n", 0)) if good else 0,
        matmul_tflops=tflops,
        devices=tuple(str(r.get("device", "")) for r in good),
        errors=tuple(errors), ranks=tuple(ranks),
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for proc in procs:
        proc.wait()


def _wait_all(procs: list[subprocess.Popen[bytes]], *, timeout: float,
              grace: float = 30.0, poll: float = 0.05) -> str | None:
    """Wait for every rank together; None, or why the rest were stopped."""
    deadline = time.monotonic() + timeout
    failed_at: float | None = None
    while True:
        codes = [proc.poll() for proc in procs]
        if None not in codes:
            return None
        now = time.monotonic()
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = now
        if failed_at is not None and now - failed_at > grace:
            _stop(procs)
            first = next(i for i, c in enumerate(codes) if c not in (None, 0))
            return (f"rank {first} failed; the ranks still waiting in the collective "
                    f"were stopped {grace:g} s later")
        if now > deadline:
            _stop(procs)
            raise ValidateError(
                f"GPU probes with {len(procs)} processes ran over {timeout:.0f} s",
                hint="another job may hold the GPUs; see nvidia-smi")
        time.sleep(poll)


def _tail(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().strip().splitlines()
    return lines[-1] if lines else "no output"


def run_gpu_probes(
    python: Path, *, gpus: int, sizes: tuple[int, ...] = DEFAULT_SIZES,
    iters: int = 100, matmul_n: int = 8192, timeout: float = 300.0,
) -> ProbeResult:
    """One process per GPU; returns the merged per-size latencies and matmul rates."""
    if gpus < 1:
        raise ValidateError("GPU probes need at least one GPU; torch sees none",
                            hint="run with --no-probes on a machine without GPUs")
    port = free_port()
    env = probe_env()
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = str(port)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="stacklock-probes-") as tmp:
        outs = [(os.path.join(tmp, f"rank{r}.out"), os.path.join(tmp, f"rank{r}.err"))
                for r in range(gpus)]
        try:
            for rank, (out, err) in enumerate(outs):
                argv = [str(python), str(PROBE_SCRIPT), "bench", "--rank", str(rank),
                        "--world", str(gpus), "--port", str(port),
                        "--iters", str(iters), "--matmul-n", str(matmul_n),
                        "--sizes", *(str(s) for s in sizes)]
                with open(out, "wb") as stdout, open(err, "wb") as stderr:
                    procs.append(subprocess.Popen(
                        argv, stdout=stdout, stderr=stderr,
                        env={**env, "RANK": str(rank), "WORLD_SIZE": str(gpus),
                             "LOCAL_RANK": str(rank)},
                        start_new_session=True,
                    ))
            stopped = _wait_all(procs, timeout=timeout)
        finally:
            _stop(procs)
        ranks: list[dict[str, Any]] = []
        errors: list[str] = [stopped] if stopped else []
        for rank, (proc, (out, err)) in enumerate(zip(procs, outs, strict=True)):
            with open(out, encoding="utf-8", errors="replace") as fh:
                data = last_json(fh.read())
            if data is None or "error" in data:
                why = data["error"] if data else _tail(err)
                errors.append(f"rank {rank} exited {proc.returncode}: {why}")
                continue
            ranks.append(data)
    return _merge(gpus, ranks, errors)
