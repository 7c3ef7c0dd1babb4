"""GPU probes: run ``_probe_script.py`` with the target venv's python.

The script needs only torch, so the venv under test never needs stacklock. The
benchmark runs one process per GPU (no torchrun): each rank joins an NCCL group over
``tcp://127.0.0.1:<free port>``; the slowest rank's time is the one reported, since a
tensor-parallel step waits for it. NVLink multicast is switched off in every child's
environment (``NO_MULTICAST``), whatever the caller's environment says.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacklock.errors import ValidateError

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
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
KB = 1024
DEFAULT_SIZES = (4 * KB, 8 * KB, 16 * KB, 32 * KB, 42 * KB, 64 * KB, 128 * KB,
                 256 * KB, 512 * KB, 1024 * KB, 2048 * KB, 4096 * KB)


def parse_size(text: str | int) -> int:
    """``"42KB"`` -> 43008, ``"4MB"`` -> 4194304, ``4096`` -> 4096 (KB = 1024 bytes)."""
    if isinstance(text, int):
        return text
    raw = text.strip().upper().removesuffix("B")
    scale = {"K": KB, "M": KB * KB}.get(raw[-1:], 1)
    digits = raw[:-1] if scale != 1 else raw
    try:
        value = float(digits)
    except ValueError:
        raise ValueError(f"{text!r} is not a size like 42KB or 4MB") from None
    return int(value * scale)


def format_size(size: int) -> str:
    if size >= KB * KB and size % (KB * KB) == 0:
        return f"{size // (KB * KB)} MB"
    if size >= KB and size % KB == 0:
        return f"{size // KB} KB"
    return f"{size} B"


def probe_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every probe and server child gets: multicast always off."""
    env = dict(os.environ if base is None else base)
    env.update(NO_MULTICAST)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                return data
    return None


def read_venv_info(python: Path, *, timeout: float = 300.0) -> dict[str, Any]:
    """torch, CUDA, NCCL and GPU facts as the venv's own python sees them."""
    try:
        proc = subprocess.run(
            [str(python), str(PROBE_SCRIPT), "info"], capture_output=True,
            text=True, timeout=timeout, env=probe_env(), check=False,
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
                   matmul_n=int(data.get("matmul_n", 0)),
                   matmul_tflops=tuple(float(t) for t in data.get("matmul_tflops", [])),
                   devices=tuple(data.get("devices", [])),
                   errors=tuple(data.get("errors", [])))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _merge(world: int, ranks: list[dict[str, Any]], errors: list[str]) -> ProbeResult:
    rows: list[AllReduceRow] = []
    good = [r for r in ranks if "allreduce" in r]
    if good and len(good) == world:
        for i, first in enumerate(good[0]["allreduce"]):
            size = int(first["bytes"])
            eager = max(float(r["allreduce"][i]["eager_us"]) for r in good)
            graphs = [r["allreduce"][i].get("graph_us") for r in good]
            graph = max(float(g) for g in graphs) if None not in graphs else None
            best = graph if graph is not None else eager
            busbw = (size / (best * 1e-6) * 2.0 * (world - 1) / world / 1e9
                     if world > 1 and best > 0 else None)
            rows.append(AllReduceRow(bytes=size, eager_us=eager, graph_us=graph,
                                     busbw_gbps=busbw))
            for r in good:
                graph_error = r["allreduce"][i].get("graph_error")
                if graph_error:
                    errors.append(f"rank {r['rank']} {format_size(size)}: "
                                  f"{graph_error}")
    tflops = tuple(float(r["matmul_tflops"]) for r in good if "matmul_tflops" in r)
    return ProbeResult(
        world=world, allreduce=tuple(rows),
        allreduce_correct=bool(good) and len(good) == world
        and all(r.get("allreduce_correct") for r in good),
        matmul_n=int(good[0].get("matmul_n", 0)) if good else 0,
        matmul_tflops=tflops,
        devices=tuple(str(r.get("device", "")) for r in good),
        errors=tuple(errors), ranks=tuple(ranks),
    )


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait()


def run_gpu_probes(
    python: Path, *, gpus: int, sizes: tuple[int, ...] = DEFAULT_SIZES,
    iters: int = 100, matmul_n: int = 8192, timeout: float = 300.0,
) -> ProbeResult:
    """One process per GPU; returns the merged per-size latencies and matmul rates."""
    if gpus < 1:
        raise ValidateError("GPU probes need at least one GPU; torch sees none",
                            hint="run with --no-probes on a machine without GPUs")
    port = _free_port()
    env = probe_env()
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = str(port)
    procs: list[subprocess.Popen[str]] = []
    try:
        for rank in range(gpus):
            argv = [str(python), str(PROBE_SCRIPT), "bench", "--rank", str(rank),
                    "--world", str(gpus), "--port", str(port),
                    "--iters", str(iters), "--matmul-n", str(matmul_n),
                    "--sizes", *(str(s) for s in sizes)]
            procs.append(subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**env, "RANK": str(rank), "WORLD_SIZE": str(gpus),
                     "LOCAL_RANK": str(rank)},
                start_new_session=True,
            ))
        deadline = time.monotonic() + timeout
        outputs: list[tuple[str, str]] = []
        for proc in procs:
            try:
                outputs.append(proc.communicate(
                    timeout=max(deadline - time.monotonic(), 1.0)))
            except subprocess.TimeoutExpired:
                _stop(procs)
                raise ValidateError(
                    f"GPU probes with {gpus} processes ran over {timeout:.0f} s",
                    hint="another job may hold the GPUs; see nvidia-smi") from None
    finally:
        _stop(procs)
    ranks: list[dict[str, Any]] = []
    errors: list[str] = []
    for rank, (proc, (stdout, stderr)) in enumerate(zip(procs, outputs, strict=True)):
        data = last_json(stdout)
        if data is None or "error" in data:
            why = data["error"] if data else (stderr.strip().splitlines() or
                                              ["no output"])[-1]
            errors.append(f"rank {rank} exited {proc.returncode}: {why}")
            continue
        ranks.append(data)
    return _merge(gpus, ranks, errors)
