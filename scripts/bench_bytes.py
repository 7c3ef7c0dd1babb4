"""Network bytes and time of one cold resolution: stacklock vs ``uv pip compile``.

Both tools run as separate processes with empty caches, through a loopback
HTTPS CONNECT proxy started here (``HTTPS_PROXY``) that counts the bytes each
tunnel carries, TLS included, in both directions: the same meter for both tools.
stacklock runs with ``--no-check`` (uv reads no wheel contents either) and, for
the record, once more with its native check.

    .venv/bin/python scripts/bench_bytes.py [--requirement apache-airflow==2.10.4]

Talks to real PyPI; uv runs as scripts/bench_resolve.py runs it
(``UV_PYTHON_DOWNLOADS=never``, CPython 3.12, x86_64-manylinux_2_28).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import threading
from pathlib import Path

from _bench import stacklock_command, timed, uv_binary

PYTHON, PLATFORM, MANYLINUX = "3.12", "x86_64-manylinux_2_28", "2_28"


class CountingProxy:
    """A CONNECT proxy on 127.0.0.1 counting the bytes of every tunnel."""

    def __init__(self) -> None:
        self.down = 0  # server -> client
        self.up = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()

    def reset(self) -> None:
        self.down = self.up = 0

    async def _handle(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        request = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        host, _, port = request.split()[1].decode().rpartition(":")
        remote_reader, remote_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       down: bool) -> None:
            try:
                while data := await src.read(1 << 16):
                    if down:
                        self.down += len(data)
                    else:
                        self.up += len(data)
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, remote_writer, False),
                             pipe(remote_reader, writer, True))


def _profile(folder: Path, requirement: str) -> Path:
    path = folder / "bench.toml"
    path.write_text(f'[target]\npython = "{PYTHON}"\nplatform = "linux_x86_64"\n'
                    f'manylinux = "{MANYLINUX}"\n[requirements]\n'
                    f'packages = ["{requirement}"]\n')
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requirement", default="apache-airflow==2.10.4")
    args = parser.parse_args()
    proxy = CountingProxy()
    env = {**os.environ, "HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}",
           "UV_PYTHON_DOWNLOADS": "never"}
    with tempfile.TemporaryDirectory(prefix="bench-bytes-") as tmp:
        work = Path(tmp)
        (work / "in.txt").write_text(args.requirement + "\n")
        runs = {
            "uv pip compile": [uv_binary(), "pip", "compile", str(work / "in.txt"),
                               "--python-version", PYTHON, "--python-platform",
                               PLATFORM, "--cache-dir", str(work / "uv"),
                               "--no-header", "-q", "-o", str(work / "uv.txt")],
            "stacklock resolve --no-check": [
                *stacklock_command(), "resolve", str(_profile(work, args.requirement)),
                "-o", str(work / "a.toml"), "--no-check"],
            "stacklock resolve": [
                *stacklock_command(), "resolve", str(work / "bench.toml"),
                "-o", str(work / "b.toml")],
        }
        for i, (name, cmd) in enumerate(runs.items()):
            proxy.reset()
            cache = work / f"cache-{i}"
            wall, cpu = timed(cmd, env={**env, "STACKLOCK_CACHE_DIR": str(cache)},
                              capture_output=True)
            print(f"{name:30} {wall:6.1f} s wall {cpu:5.1f} s CPU  "
                  f"{proxy.down / 1e6:7.2f} MB down {proxy.up / 1e6:6.2f} MB up")


if __name__ == "__main__":
    main()
