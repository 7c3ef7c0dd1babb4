"""The stand-in's arguments, where SGLang keeps its own: ``ServerArgs.add_cli_args``
fills an ``argparse`` parser (as ``sglang.srt.server_args`` does), so the gate's
preflight reads this parser exactly as it reads the real one. Unknown flags are
errors, as in SGLang."""

from __future__ import annotations

import argparse


class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--model-path", "--model", required=True)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=30000)
        parser.add_argument("--tp-size", "--tp", type=int, default=1)
        parser.add_argument("--speculative-algorithm",
                            choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE"])
        parser.add_argument("--speculative-draft-model-path")
        parser.add_argument("--fake-mode", default="ok")
        parser.add_argument("--fake-ttft", type=float, default=0.05)
        parser.add_argument("--fake-step", type=float, default=0.01)
        parser.add_argument("--fake-accept", type=int, default=3)
        parser.add_argument("--fake-no-continuous-usage", action="store_true")
