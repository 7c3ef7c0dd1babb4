"""Runs INSIDE the target venv's python: needs only the standard library and torch.

It never imports stacklock (the venv under test may not have it). Modes:

    python _probe_script.py dists
        every installed distribution (name, version, INSTALLER, dist-info path).
    python _probe_script.py import MODULE
        import one module; on failure the exception type, message and traceback.

    python _probe_script.py info
        torch/CUDA/NCCL facts and every GPU's compute capability, as one JSON object.
    python _probe_script.py bench --rank R --world W --port P [--sizes ...]
        one process per GPU: NCCL all-reduce latency per size (with 2 GPUs or more)
        and a bf16 matmul rate, as one JSON object for this rank.
    python _probe_script.py sglang-args JSON
        parse each argument list in the JSON list with the parser SGLang itself builds
        (``ServerArgs.add_cli_args``, plugins loaded first, as ``launch_server``
        does), and nothing more: no model is read, no GPU touched.

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
from typing import Any

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
    # which distribution a top-level module comes from is read by stacklock
    # (stacklock.validate.run.read_distributions): from top_level.txt or through
    # its one RECORD reader, never by importlib.metadata's csv here
    return {"python": sys.executable, "prefix": sys.prefix, "distributions": rows}


def _causes(exc: BaseException) -> list[str]:
    """The exceptions behind ``exc`` (``raise ... from``, or raised while handling
    another), innermost last: a loader that re-raises with a message of its own
    keeps the real cause (a missing ``libcuda.so.1``) only there."""
    out: list[str] = []
    seen = {id(exc)}
    inner = exc.__cause__ or exc.__context__
    while inner is not None and id(inner) not in seen and len(out) < 8:
        seen.add(id(inner))
        out.append(f"{type(inner).__name__}: {inner}")
        inner = inner.__cause__ or inner.__context__
    return out


def _import(name: str) -> dict[str, object]:
    """Import one module; on failure keep what a diagnosis needs."""
    import importlib

    try:
        module = importlib.import_module(name)
    except BaseException as exc:
        return {"module": name, "ok": False, "error_type": type(exc).__name__,
                "message": str(exc), "causes": _causes(exc),
                "traceback": traceback.format_exc(limit=8)}
    return {"module": name, "ok": True, "file": getattr(module, "__file__", None),
            "version": str(getattr(module, "__version__", "") or "") or None}


def _sglang_args(argvs: list[list[str]]) -> dict[str, object]:
    """argparse's own verdict on each argument list, as the server would give it."""
    import argparse
    import contextlib
    import io

    import sglang
    from sglang.srt.server_args import ServerArgs

    try:
        from sglang.srt.plugins import load_plugins
    except ImportError:  # releases before plugins
        load_plugins = None
    if load_plugins is not None:
        load_plugins()
    results = []
    for argv in argvs:
        parser = argparse.ArgumentParser(prog="sglang.launch_server")
        ServerArgs.add_cli_args(parser)
        if "--config" in argv:
            from sglang.srt.utils.server_args_config_parser import (
                ConfigArgumentMerger,
            )

            argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
        err, out = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                parser.parse_args(argv)
        except SystemExit as exc:
            lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
            why = lines[-1].split(": error: ", 1)[-1] if lines else (
                "the arguments make the server print and exit" if not exc.code
                else f"argparse exited {exc.code}")
            results.append({"ok": False, "error": why})
        else:
            results.append({"ok": True})
    return {"sglang": str(getattr(sglang, "__version__", "") or "") or None,
            "results": results}


def _time_allreduce(torch: Any, dist: Any, tensor: Any, iters: int, warmup: int,
                    graph: bool) -> float:
    """Mean microseconds per all-reduce of ``tensor``, in place."""
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
    return float(start.elapsed_time(end)) * 1000.0 / iters


def _allreduce_row(torch: Any, dist: Any, args: argparse.Namespace, size: int
                   ) -> dict[str, object]:
    """One size: a checked sum first, then the timing on zeros, whose sum stays zero
    however often it repeats (ones would grow by the world size each time and leave
    bf16's range), then a check that the tensor is still finite."""
    tensor = torch.full((max(size // 2, 1),), float(args.rank + 1),
                        dtype=torch.bfloat16, device="cuda")
    dist.all_reduce(tensor)
    expected = args.world * (args.world + 1) / 2
    row: dict[str, object] = {"bytes": size,
                              "correct": bool(torch.all(tensor == expected).item())}
    tensor.zero_()
    row["eager_us"] = _time_allreduce(torch, dist, tensor, args.iters, 10, False)
    try:
        row["graph_us"] = _time_allreduce(torch, dist, tensor, args.iters, 10, True)
    except Exception as exc:  # capture unsupported: keep eager numbers
        row["graph_error"] = f"{type(exc).__name__}: {exc}"
    row["finite"] = bool(torch.isfinite(tensor).all().item())
    return row


def _matmul_tflops(torch: Any, n: int, iters: int) -> float:
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
    seconds = float(start.elapsed_time(end)) / 1000.0 / iters
    return 2.0 * n**3 / seconds / 1e12


def _bench(args: argparse.Namespace) -> dict[str, object]:
    """With one GPU there is nothing to all-reduce across (NCCL would copy a buffer
    onto itself): the matmul alone runs."""
    import torch

    torch.cuda.set_device(args.rank)
    out: dict[str, object] = {"rank": args.rank, "world": args.world,
                              "device": torch.cuda.get_device_name(args.rank)}
    grouped = args.world >= 2
    if grouped:
        import torch.distributed as dist

        t0 = time.perf_counter()
        dist.init_process_group(
            "nccl", init_method=f"tcp://127.0.0.1:{args.port}",
            rank=args.rank, world_size=args.world,
            device_id=torch.device("cuda", args.rank),
        )
        out["init_seconds"] = round(time.perf_counter() - t0, 3)
        rows = [_allreduce_row(torch, dist, args, size) for size in args.sizes]
        out["allreduce"] = rows
        out["allreduce_correct"] = all(r["correct"] for r in rows)
        dist.barrier()
    if args.matmul_n > 0:
        out["matmul_n"] = args.matmul_n
        out["matmul_tflops"] = _matmul_tflops(torch, args.matmul_n, args.matmul_iters)
    if grouped:
        dist.destroy_process_group()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("info")
    sub.add_parser("dists")
    imp = sub.add_parser("import")
    imp.add_argument("module")
    sgl = sub.add_parser("sglang-args")
    sgl.add_argument("argvs", help="a JSON list of argument lists")
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
        elif args.mode == "sglang-args":
            result = _sglang_args(json.loads(args.argvs))
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
