"""Record the real data the hermetic native-check tests read (tests/data/native/).

    .venv/bin/python scripts/record_native.py

Resolves the profiles in tests/data/native/profiles/ against PyPI (without the
native check), reads every wheel of each lock with stacklock's own reader (the
central directory of each, the shared objects where there are some), and writes
``facts.json.gz``: for each wheel its lock entry and what its shared objects need
and export. The consumers under test (CONSUMERS) keep all their facts; every other
wheel's exports (torch's are 100,000 symbols) are trimmed to the ones some consumer
needs, plus the first ten of each C++ namespace and C prefix, so which package owns
which symbol family stays what it is in the wheel, and their own undefined symbols
are dropped (not under test). The hermetic resolve of
``torch211-newest-audio-vision`` finds every wheel of its lock here.
Also downloads one small real wheel with an extension module (markupsafe) for
the reader's own tests. Nothing here is typed by hand.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacklock._fs import cache_dir  # noqa: E402
from stacklock.http import make_http_client  # noqa: E402
from stacklock.native.check import symbol_family  # noqa: E402
from stacklock.native.wheel import NativeWheel, WheelReader  # noqa: E402
from stacklock.resolve.locking import lock_profile  # noqa: E402

OUT = ROOT / "tests" / "data" / "native"
CONSUMERS = {"torchaudio", "torchvision", "xformers", "bitsandbytes",
             "torch-memory-saver", "torch-c-dlpack-ext"}
SMALL_WHEEL = "markupsafe"


def _wheels(lock: Path) -> list[NativeWheel]:
    data = tomllib.loads(lock.read_text("utf-8"))
    return [NativeWheel(package=p["name"], version=p["version"], filename=w["name"],
                        url=w["url"], sha256=w["hashes"]["sha256"], size=w.get("size"))
            for p in data["packages"] for w in p["wheels"]]


def _trim(natives: dict, needed: set[str]) -> dict:
    first: dict[str, list[str]] = {}
    for obj in natives["objects"]:
        for symbol in obj["exported"]:
            family = symbol_family(symbol)
            if family is not None:
                first.setdefault(family, [])
                if len(first[family]) < 10:
                    first[family].append(symbol)
    keep = needed | {s for group in first.values() for s in group}
    for obj in natives["objects"]:
        obj["exported"] = [s for s in obj["exported"] if s in keep]
        obj["undefined"] = []  # torch's own needs are not under test here
    return natives


def main() -> int:
    wanted: dict[str, NativeWheel] = {}
    small = None
    with tempfile.TemporaryDirectory() as tmp, make_http_client() as http:
        for profile in sorted((OUT / "profiles").glob("*.toml")):
            lock = Path(tmp) / f"pylock.{profile.stem}.toml"
            lock_profile(str(profile), output=lock, check=False)
            for wheel in _wheels(lock):
                wanted[wheel.filename] = wheel
                if wheel.package == SMALL_WHEEL:
                    small = wheel
        reader = WheelReader(http, cache_dir=cache_dir())
        facts = {name: reader.read(w).to_dict() for name, w in sorted(wanted.items())}
        needed = {s for name, f in facts.items()
                  if wanted[name].package in CONSUMERS
                  for o in f["objects"] for s in o["undefined"]}
        records = []
        for name, natives in facts.items():
            wheel = wanted[name]
            if wheel.package not in CONSUMERS:
                natives = _trim(natives, needed)
            records.append({"wheel": wheel.__dict__, "natives": natives})
        blob = json.dumps({"wheels": records}, indent=0, sort_keys=True).encode()
        (OUT / "facts.json.gz").write_bytes(gzip.compress(blob, mtime=0))
        if small is not None:
            body = http.get(small.url).content
            assert hashlib.sha256(body).hexdigest() == small.sha256
            (OUT / small.filename).write_bytes(body)
    print(f"recorded {len(records)} wheels' facts and {small and small.filename}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
