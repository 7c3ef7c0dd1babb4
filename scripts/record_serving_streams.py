"""Record OpenAI completions streams serialized by SGLang's own response models.

    .venv/bin/python scripts/record_serving_streams.py

The gate's serving client reads the stream an SGLang (or vLLM) server sends for
``POST /v1/completions`` with ``stream_options``. Running such a server needs a
GPU and a model; the bytes of its stream, though, are made by SGLang's protocol
models (pydantic) and its usage processor, which run anywhere. This script
downloads the SGLang wheel of the blackwell profiles (``pip download --no-deps``),
builds a scratch venv (uv) with pydantic and openai, loads
``sglang/srt/entrypoints/openai/protocol.py`` and ``usage_processor.py`` from the
wheel as they are (the package's ``__init__`` imports the whole frontend, so the
parent packages are bare namespaces, and ``sglang.utils`` is stood in for by one
function that only request validation calls), and drives them as
``serving_completions.OpenAIServingCompletion._generate_completion_stream`` does
for each engine output: one ``CompletionStreamResponse`` per output with the text
delta (``usage`` from ``UsageProcessor.calculate_token_usage`` with
``continuous_usage_stats``), the final usage chunk ``model_dump_json(
exclude_none=True)`` of ``calculate_streaming_usage`` with ``include_usage``,
an error as ``create_streaming_error_response`` writes it, then ``[DONE]``.

The engine outputs are the gate test's script: 16 outputs of 3 tokens (" tok"
each), 8 prompt tokens, finish_reason length on the last. What is recorded in
tests/data/validate/streams/ is the exact bytes, with PROVENANCE.md.
"""

from __future__ import annotations

import datetime
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "validate" / "streams"
SGLANG = "sglang==0.5.9"
sys.path.insert(0, str(ROOT))

# Runs in the scratch venv: argv[1] the unpacked wheel, argv[2] the output folder.
_INNER = r'''
import importlib, json, sys, types
from pathlib import Path

root, out = Path(sys.argv[1]), Path(sys.argv[2])
for name in ("sglang", "sglang.srt", "sglang.srt.entrypoints",
             "sglang.srt.entrypoints.openai"):
    package = types.ModuleType(name)
    package.__path__ = [str(root / name.replace(".", "/"))]
    sys.modules[name] = package
utils = types.ModuleType("sglang.utils")
def convert_json_schema_to_str(value):  # request validation only
    raise NotImplementedError
utils.convert_json_schema_to_str = convert_json_schema_to_str
sys.modules["sglang.utils"] = utils
protocol = importlib.import_module("sglang.srt.entrypoints.openai.protocol")
usage = importlib.import_module("sglang.srt.entrypoints.openai.usage_processor")
Stream = protocol.CompletionStreamResponse
Choice = protocol.CompletionResponseStreamChoice
Usage = usage.UsageProcessor
MODEL, ID, CREATED = "recorded", "cmpl-recorded", 1760000000
PROMPT, CHUNKS, PER = 8, 16, 3

def outputs():
    for i in range(CHUNKS):
        done = (i + 1) * PER
        last = i == CHUNKS - 1
        yield {"text": " tok" * done, "meta_info": {
            "id": ID, "prompt_tokens": PROMPT, "completion_tokens": done,
            "finish_reason": {"type": "length", "length": done} if last else None}}

def stream(continuous, fail_after=None):
    sent, lines = "", []
    for n, content in enumerate(outputs()):
        if fail_after is not None and n == fail_after:
            error = protocol.ErrorResponse(object="error", message="engine aborted",
                                           type="BadRequestError", param=None, code=400)
            lines.append("data: " + json.dumps({"error": error.model_dump()}) + "\n\n")
            lines.append("data: [DONE]\n\n")
            return "".join(lines)
        meta = content["meta_info"]
        delta, sent = content["text"][len(sent):], content["text"]
        finish = meta["finish_reason"]
        chunk = Stream(id=ID, created=CREATED, object="text_completion", model=MODEL,
                       choices=[Choice(index=0, text=delta, logprobs=None,
                                       finish_reason=finish["type"] if finish else None,
                                       matched_stop=None)])
        if continuous:
            chunk.usage = Usage.calculate_token_usage(
                prompt_tokens=PROMPT, completion_tokens=meta["completion_tokens"])
        lines.append(f"data: {chunk.model_dump_json()}\n\n")
    final = Stream(id=ID, created=CREATED, choices=[], model=MODEL,
                   usage=Usage.calculate_streaming_usage(
                       {0: PROMPT}, {0: CHUNKS * PER}, {0: 0}, n_choices=1,
                       enable_cache_report=False))
    lines.append(f"data: {final.model_dump_json(exclude_none=True)}\n\n")
    lines.append("data: [DONE]\n\n")
    return "".join(lines)

out.mkdir(parents=True, exist_ok=True)
(out / "sglang-completions-usage.sse").write_text(stream(False))
(out / "sglang-completions-continuous-usage.sse").write_text(stream(True))
(out / "sglang-completions-error.sse").write_text(stream(True, fail_after=2))
'''


def main() -> int:
    from stacklock.uvbin import find_uv

    uv = find_uv()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet",
                        "--no-deps", "--only-binary", ":all:", "--index-url",
                        "https://pypi.org/simple", "-d", str(work), SGLANG],
                       check=True)
        wheel = next(work.glob("sglang-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(work / "wheel")
        subprocess.run([uv, "venv", "-q", str(work / "venv")], check=True)
        python = work / "venv" / "bin" / "python"
        subprocess.run([uv, "pip", "install", "-q", "--python", str(python),
                        "pydantic>=2", "openai"], check=True)
        versions = subprocess.run(
            [str(python), "-c", "import openai, pydantic; "
             "print(pydantic.VERSION, openai.__version__)"],
            check=True, capture_output=True, text=True).stdout.split()
        subprocess.run([str(python), "-c", _INNER, str(work / "wheel"), str(OUT)],
                       check=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        day = datetime.datetime.now(datetime.UTC).date().isoformat()
        lines = [
            "# OpenAI completions streams serialized by SGLang's own models", "",
            f"Recorded {day} by `scripts/record_serving_streams.py` (its docstring "
            "says how): SGLang's `protocol.py` and `usage_processor.py` from "
            f"`{wheel.name}` (sha256 `{digest}`, PyPI), under pydantic "
            f"{versions[0]} and openai {versions[1]}, driven as "
            "`serving_completions._generate_completion_stream` drives them for 16 "
            "engine outputs of 3 tokens (8 prompt tokens). Bytes as written.", "",
            "| file | request | size | sha256 |", "|---|---|---|---|"]
        what = {"sglang-completions-usage.sse": "include_usage",
                "sglang-completions-continuous-usage.sse":
                    "include_usage + continuous_usage_stats",
                "sglang-completions-error.sse":
                    "continuous_usage_stats; the engine fails after 2 outputs"}
        for name, request in what.items():
            body = (OUT / name).read_bytes()
            lines.append(f"| `{name}` | {request} | {len(body)} | "
                         f"`{hashlib.sha256(body).hexdigest()}` |")
        (OUT / "PROVENANCE.md").write_text("\n".join(lines) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
