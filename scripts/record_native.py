"""Record the real data the hermetic native-check tests read (tests/data/native/).

    .venv/bin/python scripts/record_native.py [--add PROFILE ...]

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

``--add PROFILE`` records only the wheels of those profiles that facts.json.gz
lacks, into it, leaving every other record as it is (a new consumer's wheel is
read, not the 8 GB of the rest). ``--add --checked PROFILE ...`` resolves them
with the native check instead and adds every wheel the check judged: each
candidate set it was given and each provider release it read beside a consumer
(``NativeGate.judged``), so a test replays a resolve that moved a provider.
Either way ``imports.json.gz`` is written:
what each consumer's Python modules import (``stacklock.native.sources``),
read from its ``.py`` members, for the check's question whether an import of
the package loads the object a finding is in.
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
from stacklock.native.sources import SourceReader  # noqa: E402
from stacklock.native.wheel import NativeWheel, WheelReader  # noqa: E402
from stacklock.profile import load_profile  # noqa: E402
from stacklock.resolve.locking import NativeGate, lock_profile  # noqa: E402
from stacklock.resolve.resolution import resolve_profile  # noqa: E402

OUT = ROOT / "tests" / "data" / "native"
CONSUMERS = {"torchaudio", "torchvision", "xformers", "bitsandbytes",
             "torch-memory-saver", "torch-c-dlpack-ext", "cupy-cuda12x", "torchao"}
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


def _locked(profiles: list[Path], tmp: str) -> dict[str, NativeWheel]:
    wanted: dict[str, NativeWheel] = {}
    for profile in profiles:
        lock = Path(tmp) / f"pylock.{profile.stem}.toml"
        lock_profile(str(profile), output=lock, check=False)
        for wheel in _wheels(lock):
            wanted[wheel.filename] = wheel
    return wanted


def _judged(profiles: list[Path], http: object) -> dict[str, NativeWheel]:
    """Every wheel the native check judged while resolving ``profiles`` (in
    the user's cache, where the check leaves what it read)."""
    wanted: dict[str, NativeWheel] = {}
    for path in profiles:
        profile = load_profile(str(path))
        gate = NativeGate(profile, http=http, offline=False,  # type: ignore[arg-type]
                          cache_dir=None)
        try:
            resolve_profile(profile, http=http, gate=gate)  # type: ignore[arg-type]
        finally:
            gate.stop()
        wanted.update((w.filename, w) for w in gate.judged.values())
    return wanted


def _write_imports(http: object, records: list[dict]) -> int:
    """imports.json.gz: the import facts of every consumer's wheel."""
    sources = SourceReader(http, cache_dir=cache_dir())  # type: ignore[arg-type]
    facts = []
    for record in records:
        wheel = NativeWheel(**record["wheel"])
        if wheel.package in CONSUMERS:
            found = sources.facts(wheel)
            assert found is not None, wheel.filename
            facts.append(found.to_dict())
    blob = json.dumps({"wheels": facts}, indent=0, sort_keys=True).encode()
    (OUT / "imports.json.gz").write_bytes(gzip.compress(blob, mtime=0))
    return len(facts)


def add(profiles: list[Path], *, checked: bool = False) -> int:
    """Merge the wheels of ``profiles`` that facts.json.gz lacks into it
    (``checked``: every wheel their resolutions' checks judged)."""
    data = json.loads(gzip.decompress((OUT / "facts.json.gz").read_bytes()))
    records: list[dict] = data["wheels"]
    have = {r["wheel"]["filename"] for r in records}
    with tempfile.TemporaryDirectory() as tmp, make_http_client() as http:
        found = _judged(profiles, http) if checked else _locked(profiles, tmp)
        # a judged wheel recorded before for other consumers is trimmed again
        # for all of them (a provider moved for a new consumer's symbols)
        again = {n for n, w in found.items()
                 if n in have and checked and w.package not in CONSUMERS}
        wanted = {n: w for n, w in found.items() if n not in have or n in again}
        # the members read for the earlier record are read again (large ones
        # the new consumers did not need included)
        earlier = {r["wheel"]["filename"]: {o["path"] for o in r["natives"]["objects"]}
                   for r in records if r["wheel"]["filename"] in again}
        records = [r for r in records if r["wheel"]["filename"] not in again]
        reader = WheelReader(http, cache_dir=cache_dir())
        facts = {name: reader.read_large(w, sorted(earlier.get(name, ()))).to_dict()
                 for name, w in sorted(wanted.items())}
        needed = {s for name, f in facts.items()
                  if wanted[name].package in CONSUMERS
                  for o in f["objects"] for s in o["undefined"]}
        needed |= {s for r in records if r["wheel"]["package"] in CONSUMERS
                   for o in r["natives"]["objects"] for s in o["undefined"]}
        for name, natives in facts.items():
            wheel = wanted[name]
            if wheel.package not in CONSUMERS:
                natives = _trim(natives, needed)
            records.append({"wheel": wheel.__dict__, "natives": natives})
        records.sort(key=lambda r: r["wheel"]["filename"])
        blob = json.dumps({"wheels": records}, indent=0, sort_keys=True).encode()
        (OUT / "facts.json.gz").write_bytes(gzip.compress(blob, mtime=0))
        imports = _write_imports(http, records)
    print(f"added {len(facts)} wheels' facts; import facts of {imports} wheels")
    return 0


def main() -> int:
    if sys.argv[1:3] == ["--add", "--checked"]:
        return add([Path(p) for p in sys.argv[3:]], checked=True)
    if sys.argv[1:2] == ["--add"]:
        return add([Path(p) for p in sys.argv[2:]])
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
        _write_imports(http, records)
        if small is not None:
            body = http.get(small.url).content
            assert hashlib.sha256(body).hexdigest() == small.sha256
            (OUT / small.filename).write_bytes(body)
    print(f"recorded {len(records)} wheels' facts and {small and small.filename}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
