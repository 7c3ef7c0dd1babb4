"""``stacklock bisect`` end to end on real wheels: built here, served by a
loopback server, installed by the real uv into the scratch venv, judged by a
real command run inside it.

The stack (GOOD -> BAD), in the search order bisect derives from the wheels'
own requirements::

    alpha 1.0 -> 2.0            beta 1.0 -> 1.1            gamma 1.0 -> 1.1
    delta 1.0 -> 2.0 + delta-plugin 1.0 -> 2.0   (each plugin pins its delta)
    kappa 1.0 -> 2.0  (2.0 asks for base[fast], whose extra needs omega>=2)
    newpkg added, oldpkg removed, omega 1.0 -> 2.0
    zeta 1.0 -> 2.0, then eps 1.0 -> 2.0  (eps 2.0 requires zeta>=2)

base 1.0 is in both. kappa's need of omega goes through an extra, so the
groups do not see it and the mix check must: a mix with kappa 2.0 and omega
1.0 is incoherent and skipped, never installed.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest

from stacklock.bisect import GateOracle, bisect_locks
from stacklock.cli import main
from stacklock.cli.bisect import _tools
from stacklock.pack.writer import PackItem, _write
from tests.helpers.install_server import Served
from tests.helpers.jsonout import parse_output
from tests.helpers.packs import HEAD
from tests.helpers.wheelkit import build_wheel, sha256

# name -> (GOOD version, its requirements, BAD version, its requirements)
STACK: dict[str, tuple[str | None, tuple[str, ...], str | None, tuple[str, ...]]] = {
    "alpha": ("1.0", (), "2.0", ()),
    "beta": ("1.0", (), "1.1", ()),
    "gamma": ("1.0", (), "1.1", ()),
    "delta": ("1.0", (), "2.0", ()),
    "delta-plugin": ("1.0", ("delta==1.0",), "2.0", ("delta==2.0",)),
    "eps": ("1.0", (), "2.0", ("zeta>=2",)),
    "zeta": ("1.0", (), "2.0", ()),
    "kappa": ("1.0", ("base",), "2.0", ("base[fast]",)),
    "base": ("1.0", ('omega>=2; extra == "fast"',), "1.0",
             ('omega>=2; extra == "fast"',)),
    "omega": ("1.0", (), "2.0", ()),
    "newpkg": (None, (), "1.0", ()),
    "oldpkg": ("1.0", (), None, ()),
}
GROUPS = 10  # delta and delta-plugin travel together; base did not change
SEARCH_ORDER = ["alpha", "beta", "delta + delta-plugin", "gamma", "kappa", "newpkg",
                "oldpkg", "omega", "zeta", "eps"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.chdir(tmp_path)


def _lock(path: Path, base: str, served: Served, end: int) -> Path:
    lines = ['lock-version = "1.0"', 'created-by = "tests"',
             'requires-python = ">=3.11"', ""]
    for name, sides in sorted(STACK.items()):
        version, requires = sides[2 * end], sides[2 * end + 1]
        if version is None:
            continue
        module = name.replace("-", "_")
        wheel = build_wheel(path.parent / "wheels", name, version,
                            {f"{module}.py": f"VERSION = {version!r}\n".encode()},
                            requires=requires)
        served.files[f"/files/{wheel.name}"] = wheel.read_bytes()
        lines += ["[[packages]]", f'name = "{name}"', f'version = "{version}"',
                  "[[packages.wheels]]", f'url = "{base}/files/{wheel.name}"',
                  f'hashes = {{sha256 = "{sha256(wheel)}"}}', ""]
    path.write_text("\n".join(lines), "utf-8")
    return path


@pytest.fixture
def locks(server: tuple[str, Served], tmp_path: Path) -> tuple[Path, Path]:
    base, served = server
    return (_lock(tmp_path / "good" / "pylock.good.toml", base, served, 0),
            _lock(tmp_path / "bad" / "pylock.bad.toml", base, served, 1))


def _oracle(condition: str) -> list[str]:
    """A command failing when ``condition`` holds, on the versions installed in
    the venv that is active (``python`` is found on PATH)."""
    code = ("import importlib.metadata as m, sys\n"
            "def v(name):\n"
            "    try:\n"
            "        return m.version(name)\n"
            "    except m.PackageNotFoundError:\n"
            "        return None\n"
            f"sys.exit({condition})\n")
    return ["python", "-c", code]


def _bisect(locks: tuple[Path, Path], oracle: list[str], *options: str,
            capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    good, bad = locks
    code = main(["bisect", str(good), str(bad), "--python", sys.executable,
                 "--json", *options, "--", *oracle])
    out = capsys.readouterr().out
    return code, parse_output(out)


def _culprit(report: dict) -> list[tuple[str, str | None, str | None]]:
    """The first culprit's changes and what moved with them."""
    if not report["culprits"]:
        return []
    first = report["culprits"][0]
    return sorted((c["name"], c["old"], c["new"])
                  for c in first["changes"] + first["moved_with_it"])


def _packages(lock: str) -> dict[str, str]:
    data = tomllib.loads(Path(lock).read_text("utf-8"))
    return {p["name"]: p["version"] for p in data["packages"]}


def _budget() -> int:
    return math.ceil(math.log2(GROUPS)) + 4


def test_one_culprit_with_its_pinned_partner_resumes_from_the_log(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    oracle = _oracle("int(v('delta') == '2.0')")
    code, first = _bisect(locks, oracle, "--max-steps", "3", capsys=capsys)
    assert code == 1 and first["culprits"] == [] and first["found"] is False
    assert "--max-steps 3" in first["stopped"]
    assert first["oracle_runs"] == 3

    code, report = _bisect(locks, oracle, capsys=capsys)
    assert code == 0
    assert [" + ".join(c["name"] for c in g["changes"])
            for g in report["groups"]] == SEARCH_ORDER
    ties = report["groups"][2]["ties"]
    assert "delta-plugin 2.0 requires delta==2.0" in ties
    assert _culprit(report) == [("delta", "1.0", "2.0"),
                                ("delta-plugin", "1.0", "2.0")]
    assert report["culprits"][0]["verified"] is True
    assert report["culprits"][0]["confirmed"] is True
    steps = report["steps"]
    assert [s["resumed"] for s in steps[:4]] == [True] * 4  # 3 runs, 1 incoherent
    assert not any(s["resumed"] for s in steps[4:])
    assert report["oracle_runs"] <= _budget()
    written = [s["lock"] for s in steps if s["lock"]]  # of both runs, each kept
    assert len(set(written)) == len(written)
    assert all((tmp_path / lock).is_file() for lock in written)
    # the two ends, then the search; each step's state, exit code and cost
    assert (steps[0]["state"], steps[0]["applied"]) == ("good", [])
    assert steps[1]["state"] == "bad" and steps[1]["exit_code"] == 1
    assert all(s["seconds"] >= 0 and s["bytes_fetched"] >= 0 for s in steps)
    # the written bracketing locks differ by the culprit alone
    last_good = _packages(report["last_good"])
    first_bad = _packages(report["first_bad"])
    assert {n for n in first_bad if first_bad[n] != last_good.get(n)} == {
        "delta", "delta-plugin"}
    assert (tmp_path / report["last_good"]).parent == tmp_path / "bisect"


def test_bytes_fetched_once_per_wheel(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _bisect(locks, _oracle("int(v('alpha') == '2.0')"),
                           capsys=capsys)
    assert code == 0 and _culprit(report) == [("alpha", "1.0", "2.0")]
    ran = [s for s in report["steps"] if s["ran"]]
    # wheels this small are read whole for their METADATA (range reads of a big
    # one take its tail): with the steps, every wheel is fetched at most once
    fetched = report["metadata_bytes"] + sum(s["bytes_fetched"] for s in ran)
    served = sum(p.stat().st_size for side in locks
                 for p in (side.parent / "wheels").iterdir())
    assert 0 < fetched <= served
    assert report["bytes_fetched"] == sum(s["bytes_fetched"] for s in ran)
    assert ran[-1]["bytes_fetched"] == 0  # by then every wheel was in the store


def test_changes_that_break_only_together_come_back_together(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    oracle = _oracle("int(v('beta') == '1.1' and v('gamma') == '1.1')")
    code, report = _bisect(locks, oracle, capsys=capsys)
    assert code == 0
    assert _culprit(report) == [("beta", "1.0", "1.1"), ("gamma", "1.0", "1.1")]
    assert report["culprits"][0]["verified"] is True
    first_bad = _packages(report["first_bad"])
    assert (first_bad["beta"], first_bad["gamma"]) == ("1.1", "1.1")


def test_a_state_the_oracle_cannot_test_is_skipped(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # 125 (cannot test) while kappa is new but oldpkg still there; bad once zeta
    # is new: the first state tried past the ends is skipped, its neighbours
    # carry the search on
    oracle = _oracle("125 if v('kappa') == '2.0' and v('oldpkg') else "
                     "int(v('zeta') == '2.0')")
    code, report = _bisect(locks, oracle, capsys=capsys)
    assert code == 0
    skipped = [s for s in report["steps"] if s["state"] == "skip"]
    assert skipped and all(s["exit_code"] == 125 for s in skipped)
    assert _culprit(report) == [("zeta", "1.0", "2.0")]


def test_an_incoherent_mix_is_skipped_never_installed(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _bisect(locks, _oracle("int(v('newpkg') is not None)"),
                           capsys=capsys)
    assert code == 0 and _culprit(report) == [("newpkg", None, "1.0")]
    incoherent = [s for s in report["steps"] if s["state"] == "incoherent"]
    assert incoherent and not any(s["ran"] or s["lock"] for s in incoherent)
    assert "requires omega>=2" in incoherent[0]["note"]
    assert 'extra == "fast"' in incoherent[0]["note"]
    # regrouped: the need is learnt, the search goes on with omega beside kappa
    assert "regrouped: kappa needs omega" in incoherent[0]["note"]
    assert report["culprits"][0]["ambiguous"] is False
    for step in report["steps"]:
        if step["lock"]:  # every installed mix: kappa 2.0 only with omega 2.0
            packages = _packages(step["lock"])
            assert packages["kappa"] == "1.0" or packages["omega"] == "2.0"
    # eps 2.0 needs zeta 2.0: never tried without it
    for step in report["steps"]:
        assert "eps" not in step["applied"] or "zeta" in step["applied"]


def test_text_output_names_groups_steps_and_culprit(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = locks
    code = main(["bisect", str(good), str(bad), "--python", sys.executable,
                 "--", *_oracle("int(v('alpha') == '2.0')")])
    out = capsys.readouterr().out
    assert code == 0
    assert "10 groups of changes" in out
    assert "tied: delta-plugin 2.0 requires delta==2.0" in out
    assert "culprit:\n  alpha 1.0 -> 2.0  (upgraded)" in out
    assert "step  1  good" in out and "step  2  bad" in out
    assert "last good: bisect/pylock.last-good.toml" in out


def test_no_oracle_is_one_line_exit_2(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = locks
    assert main(["bisect", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a command after '--', or --gate" in err


def test_a_noisy_gate_classifies_only_clear_numbers(
    locks: tuple[Path, Path], tmp_path: Path
) -> None:
    """The gate's seam with a real measurement: the venv's python reports a
    throughput from the versions it has, with run-to-run noise. 96 tok/s at
    GOOD, 54 once alpha is new; beta new without alpha sits in between, so
    BAD with alpha reverted is measured twice and then skipped, numbers kept."""
    runs = iter(range(1000))
    script = ("import importlib.metadata as m, sys\n"
              "alpha, beta = m.version('alpha'), m.version('beta')\n"
              "base = 54.1 if alpha == '2.0' else 75.0 if beta == '1.1' else 96.1\n"
              "print(base + (int(sys.argv[1]) % 3 - 1) * 0.8)\n")

    def measure(venv: Path, lock: Path, log: Path, env: Mapping[str, str]) -> float:
        out = subprocess.run([str(venv / "bin" / "python"), "-c", script,
                              str(next(runs))], check=True, capture_output=True,
                             text=True).stdout
        return float(out)

    args = argparse.Namespace(python=sys.executable, no_toolkit=False)
    with httpx.Client() as http:
        result = bisect_locks(*locks, folder=tmp_path / "gate",
                              tools=_tools(args, http, None), oracle_id="gate",
                              oracle=GateOracle(measure=measure, repeat=3))
    report = result.to_dict()
    assert _culprit(report) == [("alpha", "1.0", "2.0")]
    steps = report["steps"]
    assert steps[0]["state"] == "good" and len(steps[0]["samples"]) == 3
    assert steps[1]["state"] == "bad" and max(steps[1]["samples"]) < 56
    unclear = [s for s in steps if "unclear" in s["note"]]
    assert len(unclear) == 1 and unclear[0]["state"] == "skip"
    assert len(unclear[0]["samples"]) == 6  # measured, then once more
    assert all(70 < x < 80 for x in unclear[0]["samples"])
    assert report["culprits"][0]["verified"] is None  # that state was the revert


def _pack(lock: Path, dest: Path) -> Path:
    """A pack of ``lock``: the lock and its wheels, written by the pack writer."""
    raw = lock.read_bytes()
    items: list[tuple[PackItem, Path | None]] = [(PackItem(
        path=f"lock/{lock.name}", kind="lock", data=raw, size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest()), None)]
    for wheel in sorted((lock.parent / "wheels").iterdir()):
        items.append((PackItem(path=f"wheels/{wheel.name}", kind="wheel",
                               sha256=sha256(wheel), size=wheel.stat().st_size),
                      wheel))
    with dest.open("wb") as fh:
        _write(fh, items, {**HEAD, "lock_sha256": items[0][0].sha256})
    return dest


def test_two_packs_bisect_with_no_network(
    server: tuple[str, Served], locks: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    _, served = server
    good = _pack(locks[0], tmp_path / "good.pack")
    bad = _pack(locks[1], tmp_path / "bad.pack")
    code, report = _bisect((good, bad), _oracle("int(v('alpha') == '2.0')"),
                           capsys=capsys)
    assert code == 0 and _culprit(report) == [("alpha", "1.0", "2.0")]
    assert served.requests == []  # METADATA and wheels came from the packs
    assert report["bytes_fetched"] == 0 and report["metadata_bytes"] == 0


def test_an_end_that_cannot_install_is_one_line_and_tried_again(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good, bad = locks
    oracle = _oracle("int(v('alpha') == '2.0')")
    missing = str(tmp_path / "no-such-python")
    assert main(["bisect", str(good), str(bad), "--python", missing, "--",
                 *oracle]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GOOD (" in err and "no-such-python" in err
    # the log keeps what the oracle said, never a failed install: this run
    # installs GOOD again, with a python that works
    code, report = _bisect(locks, oracle, capsys=capsys)
    assert code == 0 and _culprit(report) == [("alpha", "1.0", "2.0")]
    assert not report["steps"][0]["resumed"]


def test_a_step_past_its_time_limit_is_bad_and_stopped(
    locks: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # hangs (with a child of its own) once alpha is new; the time limit stops both
    hang = ("import subprocess, sys, time\n"
            "import importlib.metadata as m\n"
            "if m.version('alpha') == '2.0':\n"
            "    child = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(600)'])\n"
            "    open(sys.argv[1], 'a').write(f'{child.pid}\\n')\n"
            "    time.sleep(600)\n")
    pids = tmp_path / "pids"
    code, report = _bisect(locks, ["python", "-c", hang, str(pids)],
                           "--step-timeout", "2", capsys=capsys)
    assert code == 0 and _culprit(report) == [("alpha", "1.0", "2.0")]
    stopped = [s for s in report["steps"] if s["exit_code"] is None and s["ran"]]
    assert stopped and all(s["state"] == "bad" for s in stopped)
    assert all("time limit of 2 s" in s["note"] for s in stopped)
    for pid in map(int, pids.read_text().split()):  # the whole group was stopped
        assert not Path(f"/proc/{pid}").exists() or Path(
            f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
