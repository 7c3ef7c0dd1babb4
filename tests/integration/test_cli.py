"""The CLI contract of every verb: bad input is one line, exit 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.profile import list_profiles
from tests.helpers.jsonout import parse_output

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacklock.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )


def test_profiles_json_lists_every_builtin_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["profiles", "--json"]) == 0
    rows = parse_output(capsys.readouterr().out, "profiles")["profiles"]
    assert [r["name"] for r in rows] == list_profiles()
    assert all(r["description"] for r in rows)


def test_every_broken_profile_is_named(tmp_path: Path) -> None:
    """``stacklock profiles`` beside a broken ./profiles/bad.toml, a folder
    and a FIFO named .toml: one line naming the first and the others too, exit
    2, nothing listed (it named the first alone; a FIFO or folder was said not
    to exist)."""
    import os

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.toml").write_text("this is [ not toml")
    (tmp_path / "profiles" / "dir.toml").mkdir()
    os.mkfifo(tmp_path / "profiles" / "fifo.toml")  # read, it would never end
    done = _run("profiles", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("stacklock: error: profiles/bad.toml: not valid TOML")
    assert "(unreadable too: profiles/dir.toml, profiles/fifo.toml)" in done.stderr
    (tmp_path / "profiles" / "fifo.toml").unlink()
    (tmp_path / "profiles" / "dir.toml").rmdir()
    done = _run("profiles", cwd=tmp_path)
    assert "(unreadable too" not in done.stderr and done.returncode == 2


TARGET = '[target]\npython = "3.12"\nplatform = "linux_x86_64"\nmanylinux = "2_28"\n'
PROFILES = {  # the bad profiles of the corpus: file name -> text
    "bad.toml": '[requirements]\npacakges = ["torch"]\n',
    "validate-import.toml": TARGET + '[requirements]\npackages = ["requests"]\n'
                            '[validate]\nimport = ["requests"]\n',
    "gate-min-tps.toml": TARGET + '[requirements]\npackages = ["requests"]\n'
                         '[validate.gate]\nmodel = "m"\nmin-tokens-per-sec = 90\n',
    "python-float.toml": TARGET.replace('"3.12"', "3.10")
                         + '[requirements]\npackages = ["requests"]\n',
    "gpu-arch.toml": TARGET.replace('manylinux = "2_28"\n',
                                    'manylinux = "2_28"\ngpu-arch = ["sm90"]\n')
                     + '[requirements]\npackages = ["requests"]\n',
    "min-gpus-string.toml": TARGET + '[requirements]\npackages = ["requests"]\n'
                            '[validate]\nmin-gpus = "8"\n',
}
COMMITTED_LOCK = ROOT / "locks" / "pylock.pypi-small.toml"

# Every bad input a user reported or a review found: (argv, exit code, what the one
# line must name). {in} is a folder of inputs, the command runs in an empty folder
# that must stay empty; {lock-*} are copies of a committed lock edited by hand.
CORPUS = [
    (["resolve", "{in}/bad.toml"], 2, "requirements.pacakges"),
    (["resolve", "{in}/nope.toml"], 2, "does not exist"),
    (["diff", "{in}/bad.toml", "{in}/bad.toml"], 2, "bad.toml"),
    (["validate", "{in}/nope.toml", "--no-gate"], 2, "nope.toml"),
    (["install", "{in}/nope.toml", "--dry-run"], 2, "nope.toml"),
    (["cuda", "show", "99.9.9"], 2, "99.9.9"),
    (["cuda", "show", "13.0.1", "--platform", "bogus"], 2,
     "--platform: no CUDA runfiles for platform 'bogus'"),
    # -o is checked before resolving: no traceback, no half-written lock
    (["resolve", "pypi-small", "-o", "{in}"], 2,
     "is a directory (try: name a file in it, e.g. {in}/pylock.pypi-small.toml)"),
    (["resolve", "pypi-small", "-o", "{in}/bad.toml/x.toml"], 2,
     "{in}/bad.toml is a file, not a directory"),
    (["resolve", "pypi-small", "-o", "/proc/pylock.pypi-small.toml"], 2,
     "/proc/pylock.pypi-small.toml: cannot write in /proc"),
    # only --check goes without a PROFILE (every locks/pylock.NAME.toml)
    (["resolve"], 2, "resolve needs a PROFILE (only --check checks every lock"),
    (["resolve", "--check", "-o", "{in}/x.toml"], 2,
     "-o names one lock: give its PROFILE too"),
    (["archive", "{in}/nope.toml"], 2, "nope.toml"),
    # typos in [validate] / [validate.gate] and TOML types, named by file and key
    (["resolve", "{in}/validate-import.toml"], 2,
     "validate-import.toml: validate.import: unknown key 'import'"),
    (["resolve", "{in}/gate-min-tps.toml"], 2,
     "gate-min-tps.toml: validate.gate.min-tokens-per-sec: unknown key"),
    (["resolve", "{in}/python-float.toml"], 2,
     "python-float.toml: target.python: expected a string, got 3.1"),
    (["resolve", "{in}/min-gpus-string.toml"], 2,
     "min-gpus-string.toml: validate.min-gpus: expected a positive integer, got '8'"),
    (["resolve", "{in}/gpu-arch.toml"], 2,  # the key path once
     "gpu-arch.toml: target.gpu-arch: gpu-arch 'sm90' is not a compute capability"),
    # ... and the same typos in a lock edited by hand: refused, never skipped
    (["validate", "{lock-import}", "--no-gate"], 2,
     "lock-import.toml: tool.stacklock.validate.import: unknown key 'import'"),
    (["install", "{lock-import}", "--dry-run"], 2,
     "lock-import.toml: tool.stacklock.validate.import: unknown key 'import'"),
    (["install", "{lock-gate}", "--dry-run", "--python", sys.executable], 2,
     "lock-gate.toml: tool.stacklock.validate.gate.min-tokens-per-sec: unknown"),
    (["validate", "{lock-min-gpus}", "--no-gate"], 2,
     "tool.stacklock.validate.min-gpus: expected a positive integer, got '8'"),
    # links: the argument and the flags by their names, before any request
    (["links", "a/b", "--index", "http://127.0.0.1:9/simple"], 2,  # no request
     "PROJECT 'a/b' is not a project name"),
    (["links", "torch", "--index", "{in}", "--platform", "windows"], 2,
     "--platform: platform 'windows' is not supported"),
    (["links", "torch", "--index", "{in}", "--manylinux", "9"], 2,
     "--manylinux: manylinux '9' is not a glibc version"),
    (["links", "torch", "--index", "{in}", "--python", "3"], 2,
     "--python: python '3' is not a CPython 3.x version"),
    (["links", "no-such-project", "--index", "{in}"], 1,
     "no-such-project is not on index"),
    (["pack", str(COMMITTED_LOCK), "-o", "{in}"], 2,
     "is a directory (try: name a file in it, e.g. {in}/pylock.pypi-small.pack)"),
    (["snapshot", "--venv", sys.prefix, "-o", "{in}"], 2,
     "{in}: cannot write the lock (Is a directory)"),
    # install's --report is checked before anything is installed
    (["install", str(COMMITTED_LOCK), "--report", "{in}/bad.toml", "--venv", "env"],
     2, "{in}/bad.toml is a file, not a directory"),
    (["install", str(COMMITTED_LOCK), "--venv", "{in}/bad.toml", "--dry-run"], 2,
     "{in}/bad.toml is a file, not a venv"),
    (["validate", str(COMMITTED_LOCK), "--venv", sys.prefix, "--no-gate",
      "--report", "{in}/bad.toml"], 2, "{in}/bad.toml is a file, not a directory"),
    (["validate", str(COMMITTED_LOCK), "--venv", sys.prefix, "--no-gate",
      "--report", "/proc/report"], 2,
     "/proc/report/report.json: cannot write in /proc"),
    (["links", "torch", "--index", ""], 2, "--index is empty (an unset variable?)"),
    # usage errors: one line too, naming the argument and where the help is
    (["diff"], 2, "required: OLD, NEW (see 'stacklock diff --help')"),
    (["install", "--bogus"], 2, "unrecognized arguments: --bogus"),
    (["cuda", "bogus"], 2, "invalid choice: 'bogus'"),
    # a refused rollback makes no <venv>.stacklock folder (and no lock file in it)
    (["install", "--rollback", "--venv", "env"], 2,
     "is not managed by stacklock install"),
]


def _corpus_inputs(folder: Path) -> dict[str, str]:
    folder.mkdir()
    for name, text in PROFILES.items():
        (folder / name).write_text(text)
    locks = {"lock-import": ('imports = [', 'import = ['),
             "lock-gate": ("[tool.stacklock.validate]\n",
                           '[tool.stacklock.validate.gate]\nmodel = "m"\n'
                           "min-tokens-per-sec = 90\n[tool.stacklock.validate]\n"),
             "lock-min-gpus": ("imports = [", 'min-gpus = "8"\nimports = [')}
    paths = {"{in}": str(folder)}
    committed = COMMITTED_LOCK.read_text()
    for name, (old, new) in locks.items():
        assert committed.count(old) == 1, old
        (folder / f"{name}.toml").write_text(committed.replace(old, new))
        paths[f"{{{name}}}"] = str(folder / f"{name}.toml")
    return paths


@pytest.mark.parametrize(("argv", "code", "needle"), CORPUS,
                         ids=[" ".join(c[0][:2]) + f"-{i}" for i, c in
                              enumerate(CORPUS)])
def test_bad_input_is_one_line_exit_2_no_traceback(
    tmp_path: Path, argv: list[str], code: int, needle: str
) -> None:
    """One line naming the file/key/flag, exit 2 (1 for "no"), no traceback,
    nothing written where the command ran or beside its inputs."""
    paths = _corpus_inputs(tmp_path / "in")
    before = sorted(p.name for p in (tmp_path / "in").iterdir())
    work = tmp_path / "work"
    work.mkdir()
    for key, value in paths.items():
        argv = [a.replace(key, value) for a in argv]
        needle = needle.replace(key, value)
    result = subprocess.run(
        [sys.executable, "-m", "stacklock.cli", *argv], cwd=work,
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.returncode == code, result.stderr + result.stdout
    said = result.stderr if code == 2 else result.stdout + result.stderr
    lines = said.strip().splitlines()
    assert len(lines) == 1, said
    if code == 2:
        assert lines[0].startswith("stacklock: error: ")
    assert needle in lines[0]
    assert "Traceback" not in result.stderr
    assert list(work.iterdir()) == []  # nothing half-written, nothing unasked
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == before


def test_no_safety_check_is_skipped_when_an_import_fails() -> None:
    """Driver preflight, coherence, the strict lock load, the snapshot's driver
    reading: imported unconditionally. An ``except ImportError`` in stacklock
    would let a broken install skip a check silently; the one allowed is in the
    probe script, which runs inside the checked venv (sglang releases differ)."""
    import ast

    found = []
    for path in sorted((ROOT / "stacklock").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                if names & {"ImportError", "ModuleNotFoundError"}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert [f.rsplit(":", 1)[0] for f in found] == [
        "stacklock/validate/_probe_script.py"], found


def test_terminal_progress_draws_one_bar_per_download() -> None:
    from stacklock.cli.output import progress as _progress

    progress, on_status, on_download = _progress(enabled=True, status="resolving")
    with progress:
        on_status("torch")
        on_download("torch.whl", 10, 100)
        on_download("torch.whl", 100, 100)
        on_download("sgl_kernel.whl", 5, None)
    tasks = {t.description: t for t in progress.tasks}
    assert tasks["resolving: torch"].total is None
    assert (tasks["torch.whl"].completed, tasks["torch.whl"].total) == (100, 100)
    assert tasks["sgl_kernel.whl"].completed == 5
    assert len(tasks) == 3
    quiet = _progress(enabled=False, status="resolving")
    assert quiet[1] is None and quiet[2] is None  # --json and -q stay quiet
    piped = _progress(enabled=False, status="resolving", lines=True)
    assert callable(piped[1]) and piped[2] is None  # a pipe: phase lines


def test_a_pipe_gets_one_line_per_phase_once_the_run_takes_a_while() -> None:
    from stacklock.cli.output import phase_lines

    now = [0.0]
    said: list[str] = []
    on_status = phase_lines("resolving", clock=lambda: now[0], write=said.append)
    for at, text in [(0.1, "3 pages, 1 metadata read"),
                     (0.5, "9 pages, 4 metadata read"),
                     (0.8, "native check: 1 wheels read")]:
        now[0] = at
        on_status(text)
    assert said == []  # a run that ends within a second says nothing
    for at, text in [(1.4, "native check: 5 wheels read"),  # the phase running
                     (1.6, "native check: 6 wheels read"),
                     (2.0, "40 pages, 20 metadata read"),  # the resolver again
                     (2.5, "choosing wheels: torch 2.11.0"),
                     (2.6, "choosing wheels: torchaudio 2.11.0"),
                     (2.7, "native check: 7 wheels read")]:
        now[0] = at
        on_status(text)
    assert said == ["stacklock: native check (from 0.8 s)\n",
                    "stacklock: resolving (from 2.0 s)\n",
                    "stacklock: choosing wheels (from 2.5 s)\n",
                    "stacklock: native check (from 2.7 s)\n"]


def test_a_closed_pipe_is_no_traceback() -> None:
    """``stacklock cuda list | head -1``: the reader leaves before the output."""
    proc = subprocess.Popen([sys.executable, "-m", "stacklock.cli", "cuda", "list"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the interpreter has even started
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_the_command_writes_everything_and_exits_with_mains_code(
        tmp_path: Path) -> None:
    """Every byte written arrives, into a pipe and into a block-buffered file, and
    the exit code is main's."""
    out = tmp_path / "list.json"
    with out.open("w") as fh:
        done = subprocess.run([sys.executable, "-m", "stacklock.cli", "cuda", "list",
                               "--json"], cwd=ROOT, stdout=fh, timeout=120)
    assert done.returncode == 0
    in_file = parse_output(out.read_text("utf-8"), "cuda-list")
    piped = subprocess.run([sys.executable, "-m", "stacklock", "cuda", "list",
                            "--json"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert piped.returncode == 0 and json.loads(piped.stdout) == in_file
    assert len(in_file["releases"]) > 10
    bad = subprocess.run([sys.executable, "-m", "stacklock.cli", "diff", "nope.toml",
                          "nope.toml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("stacklock: error: ")


@pytest.mark.parametrize("bundle", ["missing.pem", "not-pem.pem", "a-folder"])
def test_an_unreadable_ca_bundle_is_one_line_exit_2(tmp_path: Path,
                                                    bundle: str) -> None:
    """SSL_CERT_FILE naming no file, a file with no certificate in it or a
    folder: one line naming the variable, exit 2, no traceback from the
    resolution or from the threads that start early (the TLS context's among
    them), and no lock."""
    (tmp_path / "not-pem.pem").write_text("not a certificate\n")
    (tmp_path / "a-folder").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "stacklock.cli", "resolve", "pypi-small",
         "-o", str(work / "lock.toml"), "--no-check"],
        cwd=work, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "cache"),
             "SSL_CERT_FILE": str(tmp_path / bundle)},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"stacklock: error: SSL_CERT_FILE={tmp_path / bundle}: ")
    assert "Traceback" not in result.stderr
    assert list(work.iterdir()) == []


def test_an_index_url_with_a_bad_port_is_one_line_exit_2(tmp_path: Path) -> None:
    """A port out of range in --index was a traceback from deep in the HTTP
    layer: now one line naming the option, exit 2, and no lock."""
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "stacklock.cli", "resolve", "pypi-small",
         "-o", str(work / "lock.toml"), "--no-check",
         "--index", "pypi=https://pypi.org:99999/simple"],
        cwd=work, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "STACKLOCK_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "--index pypi=https://pypi.org:99999/simple: bad port" in lines[0]
    assert list(work.iterdir()) == []
