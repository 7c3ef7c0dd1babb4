"""The README's commands do what the README says: every command in its code
blocks is listed here, those that can run offline are run (with the exit code
and output the README states), and each of the others says what it needs. A
command added to the README fails this test until it is listed."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data import DATA, ROOT

README = ROOT / "README.md"
NETWORK = "the network: PyPI"
INDEXES = "the network: PyTorch's and SGLang's indexes (blackwell-cu130)"
GPU = "an NVIDIA driver and GPUs"
INSTALLED = "a venv stacklock installed (and its GPUs for a CUDA stack)"
# every command of the README: how it runs here, or what it needs
NEEDS = {
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
    ".venv/bin/stacklock resolve pypi-cu130": NETWORK,
    ".venv/bin/python -m pytest": "it is this test suite",
    "stacklock resolve blackwell-cu130": INDEXES,
    "stacklock install locks/pylock.blackwell-cu130.toml --venv /opt/ml-env":
        f"{INDEXES} and {GPU}",
    "stacklock validate locks/pylock.blackwell-cu130.toml --venv /opt/ml-env":
        INSTALLED,
    "stacklock diff locks/pylock.blackwell-cu128.toml "
    "locks/pylock.blackwell-cu130.toml": "the lock resolve blackwell-cu130 writes",
    "stacklock resolve blackwell-cu130 --index "
    "pytorch-cu130=https://mirror.example/whl/cu130": "a mirror of PyTorch's index",
    "stacklock check locks/pylock.pypi-cu130.toml": NETWORK,
    "rsync -a ~/.cache/stacklock/native/ ci-cache:/srv/stacklock-facts/":
        "a host to copy to",
    "STACKLOCK_NATIVE_FACTS=https://ci-cache.example.com/stacklock-facts "
    "stacklock resolve pypi-cu130": "a server holding the facts",
    "stacklock links sgl-kernel --profile blackwell-cu130": INDEXES,
    "stacklock install locks/pylock.pypi-cu130.toml --venv /opt/ml-env --dry-run":
        "a Python 3.12 that uv python find finds (the lock's target)",
    "source /opt/ml-env/stacklock-activate.sh": INSTALLED,
    "stacklock install --rollback --venv /opt/ml-env": INSTALLED,
    "stacklock pack locks/pylock.pypi-small.toml -o pypi-small.pack": NETWORK,
    "python3 pypi-small.pack install --venv /opt/ml-env --report report/":
        "the pack the command above writes",
    "python3 pypi-small.pack validate --venv /opt/ml-env": INSTALLED,
    "stacklock archive locks/pylock.blackwell-cu130-nightly.toml "
    "s3://team-wheels/stacklock": "an S3 bucket",
    "stacklock validate locks/pylock.pypi-cu130.toml --venv /opt/ml-env "
    "--report out/": INSTALLED,
    "stacklock bisect pylock.numerics-2024.toml pylock.numerics-2025.toml -- "
    "python -c 'import scipy.linalg'": "two locks of the user's own",
    "stacklock bisect pylock.nightly-last-week.toml pylock.nightly-today.toml "
    "--gate --repeat 3": f"two locks of the user's own and {GPU}",
    "stacklock update blackwell-cu130-nightly --prereleases --summary update.md "
    "--validate -- python bench.py": f"{INDEXES} and {GPU}",
    "srun --nodes=16 --ntasks-per-node=1 bash -c 'python3 stack.pack install "
    "--venv /opt/stacklock/venv --report fleet/$(hostname)'": "a Slurm cluster",
}
# the commands run here: (exit code the README states, setup)
RUN = {
    "stacklock diff locks/pylock.blackwell-cu128.toml locks/pylock.pypi-cu130.toml "
    "--format markdown": 0,
    "stacklock cuda check-driver --lock locks/pylock.blackwell-cu128.toml": 1,
    "stacklock fleet report fleet/": 0,
    "stacklock install pylock.edited.toml --dry-run": 2,
}


def readme_commands() -> list[str]:
    """Each command line of the README's code blocks (fenced, or indented four
    spaces), continuation lines joined, comments and output lines dropped."""
    found: list[str] = []
    fenced = False
    pending = ""
    for line in README.read_text("utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")) or line.lstrip().startswith("|"):
            continue
        text = line.strip()
        if not text or text.startswith("stacklock: error:"):  # an output line
            continue
        text = text.removeprefix("$ ")
        text = pending + text
        if text.endswith("\\"):
            pending = text[:-1]
            continue
        pending = ""
        found.append(re.sub(r"\s{2,}#.*$", "", text))  # "cmd    # what it does"
    return found


def test_every_readme_command_is_run_here_or_says_what_it_needs() -> None:
    commands = readme_commands()
    assert len(commands) == len(set(commands))
    assert set(commands) == set(NEEDS) | set(RUN)
    assert not set(NEEDS) & set(RUN)


def _stacklock(command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "stacklock"
    return subprocess.run([sys.executable, "-m", "stacklock", *argv[1:]], cwd=cwd,
                          env={**os.environ, "STACKLOCK_CACHE_DIR": str(cwd / "c"),
                               **env},
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder with the repository's locks, where a command may write."""
    (tmp_path / "locks").symlink_to(ROOT / "locks")
    return tmp_path


def test_the_diff_for_a_pull_request(work: Path) -> None:
    command = next(c for c in RUN if c.startswith("stacklock diff"))
    done = _stacklock(command, work)
    assert done.returncode == RUN[command], done.stderr
    assert "| package |" in done.stdout and "upgraded" in done.stdout


@pytest.mark.parametrize(("driver", "code"), [("580.82.07", 0), ("535.54.03", 1)])
def test_check_driver_exits_1_unless_the_driver_runs_the_lock(
        work: Path, driver: str, code: int) -> None:
    """README: "check-driver exits 1 unless a driver ... passes"; with none at
    all too (tests/integration/test_json_output.py)."""
    command = next(c for c in RUN if "check-driver" in c)
    done = _stacklock(command, work, STACKLOCK_DRIVER_VERSION=driver)
    assert done.returncode == code, done.stderr
    if code:
        assert done.returncode == RUN[command]
        assert "verdict: the driver cannot run all of it" in done.stdout


def test_the_fleet_table_from_a_gathered_report(work: Path) -> None:
    command = next(c for c in RUN if "fleet report" in c)
    host = work / "fleet" / "h200"
    host.mkdir(parents=True)
    shutil.copy(DATA / "pack-h200" / "report.json", host / "report.json")
    done = _stacklock(command, work)
    assert done.returncode == RUN[command], done.stderr
    assert (work / "fleet" / "fleet.md").is_file()
    assert "h200" in done.stdout


def test_a_hand_edited_typo_stops_install_with_the_readme_s_line(work: Path) -> None:
    command = next(c for c in RUN if "pylock.edited.toml" in c)
    text = (ROOT / "locks" / "pylock.pypi-small.toml").read_text("utf-8")
    assert "\nimports = [" in text
    (work / "pylock.edited.toml").write_text(
        text.replace("\nimports = [", "\nimport = [", 1), "utf-8")
    done = _stacklock(command, work)
    shown = README.read_text("utf-8").split(f"$ {command}\n", 1)[1]
    assert done.returncode == RUN[command]
    assert done.stderr == shown.splitlines()[0].strip() + "\n"


def test_the_locks_the_readme_calls_committed_are_the_committed_ones() -> None:
    """Its examples use locks resolve writes (blackwell-cu130): the quickstart
    says which are in locks/ (the others, NEEDS says, need that resolve)."""
    text = " ".join(README.read_text("utf-8").split())
    said = re.search(r"`locks/` holds (.*?); `resolve` writes the others", text)
    assert said is not None
    committed = {p.name.removeprefix("pylock.").removesuffix(".toml")
                 for p in (ROOT / "locks").glob("pylock.*.toml")}
    assert set(re.findall(r"`([a-z0-9-]+)`", said.group(1))) == committed
