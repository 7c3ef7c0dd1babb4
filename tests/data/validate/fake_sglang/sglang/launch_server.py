"""A loopback server speaking SGLang's HTTP API with scripted timing, for gate tests.

Routes and JSON shapes follow SGLang's ``python/sglang/srt/entrypoints/http_server.py``
(``/health``, ``/v1/models``, ``/generate``, ``/get_server_info``) and its OpenAI layer
(``/v1/completions`` with ``stream_options.include_usage``, a last usage-only chunk,
and ``continuous_usage_stats``, usage on every chunk, as SGLang and vLLM send them):
streamed ``data: {json}`` events, cumulative ``text`` and
``meta_info.completion_tokens`` on ``/generate``, ``meta_info.spec_verify_ct`` when a
speculative algorithm is set, ``data: [DONE]``. ``--fake-no-continuous-usage`` plays
a server that ignores ``continuous_usage_stats``. Its flags come from
``sglang.srt.server_args`` and unknown ones are errors, as in SGLang.

Timing is scripted: the first event comes ``--fake-ttft`` seconds after the request,
then one event every ``--fake-step`` seconds carrying 1 token (baseline) or
``--fake-accept`` tokens (with ``--speculative-algorithm``, one verify pass each).

``--fake-mode``: ok | crash-start (exit 3 before serving) | slow-health (/health never
200) | crash-after=N (the process dies while serving request N) | slow (ttft 30 s).
Like SGLang it starts a child process (its "scheduler") in the same process group.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .srt.server_args import ServerArgs


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv)


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.requests = 0
        self.verify = 0
        self.tokens = 0
        self.in_flight = 0
        self.most_in_flight = 0  # the most requests streaming at once

    @property
    def accept(self) -> int:
        return self.args.fake_accept if self.args.speculative_algorithm else 1


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *a: object) -> None:
            pass

        def _json(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                if args.fake_mode == "slow-health":
                    self._json(503, {"error": "model is loading"})
                else:
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{
                    "id": args.model_path, "object": "model", "created": 0,
                    "owned_by": "sglang", "root": args.model_path,
                    "max_model_len": 8192}]})
            elif self.path in ("/get_server_info", "/server_info"):
                with state.lock:
                    avg = state.tokens / state.verify if state.verify else None
                    served = state.requests
                    most = state.most_in_flight
                self._json(200, {"model_path": args.model_path,
                                 "speculative_algorithm": args.speculative_algorithm,
                                 "internal_states": [{
                                     "last_gen_throughput": 0.0,
                                     "avg_spec_accept_length":
                                         avg if args.speculative_algorithm else None}],
                                 "version": "0.5.9",
                                 # the stand-in's own: what tests count warm-ups by
                                 "fake_requests_served": served,
                                 "fake_most_in_flight": most})
            else:
                self._json(404, {"detail": "Not Found"})

        def _stream(self, events) -> None:  # type: ignore[no-untyped-def]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in events:
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _steps(self, max_new: int):  # type: ignore[no-untyped-def]
            """(tokens so far, verify passes so far), on the scripted clock."""
            with state.lock:
                state.requests += 1
                number = state.requests
                state.in_flight += 1
                state.most_in_flight = max(state.most_in_flight, state.in_flight)
            try:
                yield from self._scripted(number, max_new)
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _scripted(self, number: int, max_new: int):  # type: ignore[no-untyped-def]
            if args.fake_mode.startswith("crash-after="):
                if number > int(args.fake_mode.split("=", 1)[1]):
                    os._exit(7)
            ttft = 30.0 if args.fake_mode == "slow" else args.fake_ttft
            time.sleep(ttft)
            done = min(state.accept, max_new)
            verify = 1
            yield done, verify
            while done < max_new:
                time.sleep(args.fake_step)
                done = min(done + state.accept, max_new)
                verify += 1
                yield done, verify
            with state.lock:
                state.verify += verify
                state.tokens += done

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/generate":
                ids = body.get("input_ids") or []
                max_new = int(body["sampling_params"]["max_new_tokens"])

                def events():  # type: ignore[no-untyped-def]
                    for done, verify in self._steps(max_new):
                        meta = {"id": "req", "finish_reason": None,
                                "prompt_tokens": len(ids), "completion_tokens": done,
                                "cached_tokens": 0}
                        if done == max_new:
                            meta["finish_reason"] = {"type": "length",
                                                     "length": max_new}
                        if args.speculative_algorithm:
                            meta["spec_verify_ct"] = verify
                        yield {"text": " tok" * done, "output_ids": list(range(done)),
                               "meta_info": meta}

                self._stream(events())
            elif self.path == "/v1/completions":
                max_new = int(body["max_tokens"])
                prompt = body.get("prompt") or []
                options = body.get("stream_options") or {}
                usage = options.get("include_usage")
                every = (options.get("continuous_usage_stats")
                         and not args.fake_no_continuous_usage)

                def counts(done: int) -> dict[str, int]:
                    return {"prompt_tokens": len(prompt), "completion_tokens": done,
                            "total_tokens": len(prompt) + done}

                def chunks():  # type: ignore[no-untyped-def]
                    last = 0
                    for done, _ in self._steps(max_new):
                        yield {"id": "cmpl", "object": "text_completion", "created": 0,
                               "model": args.model_path, "choices": [{
                                   "index": 0, "text": " tok" * (done - last),
                                   "logprobs": None,
                                   "finish_reason": "length" if done == max_new
                                   else None}],
                               "usage": counts(done) if every else None}
                        last = done
                    if usage:
                        yield {"id": "cmpl", "object": "text_completion",
                               "created": 0, "model": args.model_path, "choices": [],
                               "usage": counts(last)}

                self._stream(chunks())
            else:
                self._json(404, {"detail": "Not Found"})

    return Handler


def serve(args: argparse.Namespace) -> ThreadingHTTPServer:
    state = State(args)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(state))
    server.daemon_threads = True
    server.state = state  # type: ignore[attr-defined]  # tests read its counters
    return server


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    print(f"fake sglang pid={os.getpid()} mode={args.fake_mode} "
          f"speculative={args.speculative_algorithm}", flush=True)
    shown = sorted(k for k in os.environ
                   if k.startswith(("SGLANG_", "NCCL_", "TORCH_SYMM", "NVSHMEM_",
                                    "TRITON_CACHE_DIR", "TMPDIR")))
    print("env " + " ".join(f"{k}={os.environ[k]}" for k in shown), flush=True)
    if args.fake_mode == "crash-start":
        print("RuntimeError: CUDA error: out of memory", flush=True)
        sys.exit(3)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"scheduler pid={child.pid}", flush=True)
    server = serve(args)
    print(f"The server is fired up and ready to roll! port={args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
