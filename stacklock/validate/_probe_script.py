"""Runs INSIDE the target venv's python: needs only the standard library and torch.

It never imports stacklock (the venv under test may not have it). Modes:

    python _probe_script.py dists
        every installed distribution (name, version, INSTALLER, dist-info path).
    python _probe_script.py import MODULE
        import one module; on failure the exception type, message and traceback.

    python _probe_script.py info
        torch/CUDA/NCCL facts and every GPU's compute capability, as one JSON object.
    python _probe_script.py bench --rank R --world W --port P [--sizes ...]
        one process per GPU: NCCL all-reduce latency per size and a bf16 matmul rate,
        as one JSON object for this rank.

NVLink multicast stays off whatever the caller's environment says: a program that
uses it can put a shared host's GPUs out of service.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
os.environ.update(NO_MULTICAST)

DEFAULT_SIZES = [4096, 8192, 16384, 32768, 43008, 65536, 131072, 262144, 524288,
                 1048576, 2097152, 4194304]


def _info() -> dict[str, object]:
    import torch

    out: dict[str, object] = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "device_count": 0,
        "devices": [],
        "arch_list": [],
        "nccl_version": None,
        "env": {k: os.environ.get(k) for k in NO_MULTICAST},
    }
    if not torch.cuda.is_available():
        return out
    out["device_count"] = torch.cuda.device_count()
    out["arch_list"] = list(torch.cuda.get_arch_list())
    devices = []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        props = torch.cuda.get_device_properties(i)
        devices.append({
            "index": i,
            "name": props.name,
            "capability": f"{major}.{minor}",
            "sm": f"sm_{major}{minor}",
            "total_memory": props.total_memory,
            "multiprocessors": props.multi_processor_count,
        })
    out["devices"] = devices
    try:
        nccl = torch.cuda.nccl.version()
        out["nccl_version"] = ".".join(str(p) for p in nccl) if isinstance(
            nccl, tuple) else str(nccl)
    except Exception as exc:  # NCCL missing from this build
        out["nccl_error"] = f"{type(exc).__name__}: {exc}"
    return out


def _dists() -> dict[str, object]:
    """Every installed distribution with what validate compares against the lock."""
    import importlib.metadata as md

    rows = []
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        path = getattr(dist, "_path", None)
        rows.append({
            "name": name,
            "version": dist.version,
            "installer": (dist.read_text("INSTALLER") or "").strip() or None,
            "dist_info": str(path) if path is not None else None,
            "requires": list(dist.requires or []),
        })
    modules = {k: sorted(set(v)) for k, v in md.packages_distributions().items()}
    return {"python": sys.executable, "prefix": sys.prefix, "distributions": rows,
            "modules": modules}


def _import(name: str) -> dict[str, object]:
    """Import one module; on failure keep what a diagnosis needs."""
    import importlib

    try:
        module = importlib.import_module(name)
    except BaseException as exc:
        return {"module": name, "ok": False, "error_type": type(exc).__name__,
                "message": str(exc),
                "traceback": traceback.format_exc(limit=8)}
    return {"module": name, "ok": True, "file": getattr(module, "__file__", None),
            "version": str(getattr(module, "__version__", "") or "") or None}


def _time_allreduce(torch, dist, size: int, iters: int, warmup: int,
                    graph: bool) -> float:
    """Mean microseconds per all-reduce of ``size`` bytes of bf16."""
    tensor = torch.ones(max(size // 2, 1), dtype=torch.bfloat16, device="cuda")
    stream = torch.cuda.Stream()
    if graph:
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                dist.all_reduce(tensor)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(iters):
                dist.all_reduce(tensor)
        torch.cuda.synchronize()
        g.replay()  # warm the graph once
        torch.cuda.synchronize()
        dist.barrier()
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        g.replay()
        end.record()
    else:
        for _ in range(warmup):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        for _ in range(iters):
            dist.all_reduce(tensor)
        end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def _matmul_tflops(torch, n: int, iters: int) -> float:
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    for _ in range(iters):
        torch.matmul(a, b)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000.0 / iters
    return 2.0 * n**3 / seconds / 1e12


def _bench(args: argparse.Namespace) -> dict[str, object]:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(args.rank)
    out: dict[str, object] = {"rank": args.rank, "world": args.world,
                              "device": torch.cuda.get_device_name(args.rank)}
    t0 = time.perf_counter()
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{args.port}",
        rank=args.rank, world_size=args.world,
        device_id=torch.device("cuda", args.rank),
    )
    out["init_seconds"] = round(time.perf_counter() - t0, 3)
    check = torch.full((4,), float(args.rank + 1), device="cuda")
    dist.all_reduce(check)
    expected = args.world * (args.world + 1) / 2
    out["allreduce_correct"] = bool(torch.all(check == expected).item())
    rows = []
    for size in args.sizes:
        row: dict[str, object] = {"bytes": size}
        row["eager_us"] = _time_allreduce(torch, dist, size, args.iters, 10, False)
        try:
            row["graph_us"] = _time_allreduce(torch, dist, size, args.iters, 10, True)
        except Exception as exc:  # capture unsupported: keep eager numbers
            row["graph_error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    out["allreduce"] = rows
    dist.barrier()
    if args.matmul_n > 0:
        out["matmul_n"] = args.matmul_n
        out["matmul_tflops"] = _matmul_tflops(torch, args.matmul_n, args.matmul_iters)
    dist.destroy_process_group()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("info")
    sub.add_parser("dists")
    imp = sub.add_parser("import")
    imp.add_argument("module")
    bench = sub.add_parser("bench")
    bench.add_argument("--rank", type=int, required=True)
    bench.add_argument("--world", type=int, required=True)
    bench.add_argument("--port", type=int, required=True)
    bench.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES)
    bench.add_argument("--iters", type=int, default=100)
    bench.add_argument("--matmul-n", type=int, default=8192)
    bench.add_argument("--matmul-iters", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        if args.mode == "info":
            result = _info()
        elif args.mode == "dists":
            result = _dists()
        elif args.mode == "import":
            result = _import(args.module)
        else:
            result = _bench(args)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=5)}
        print(json.dumps(result))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
