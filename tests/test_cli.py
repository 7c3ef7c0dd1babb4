"""The CLI contract of every verb: bad input is one line, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.profile import list_profiles

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacklock.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )


def test_profiles_json_lists_every_builtin_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["profiles", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list_profiles()
    assert all(r["description"] for r in rows)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["resolve", "{bad}"], "requirements.pacakges"),
        (["resolve", "{missing}"], "does not exist"),
        (["diff", "{bad}", "{bad}"], "bad.toml"),
        (["validate", "{missing}", "--no-gate"], "nope.toml"),
        (["install", "{missing}", "--dry-run"], "nope.toml"),
        (["cuda", "show", "99.9.9"], "99.9.9"),
    ],
)
def test_bad_input_is_one_line_exit_2_no_traceback(
    tmp_path: Path, argv: list[str], needle: str
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[requirements]\npacakges = ["torch"]\n')
    paths = {"{bad}": str(bad), "{missing}": str(tmp_path / "nope.toml")}
    result = _run(*[paths.get(a, a) for a in argv], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("stacklock: error: ")
    assert needle in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "locks").exists()  # nothing half-written


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
    assert quiet[1] is None and quiet[2] is None  # pipes and --json stay quiet


_LIST_MODULES = """
import contextlib, io, json, sys
from stacklock.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""


def _imported(*args: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``stacklock ARGS``."""
    result = subprocess.run(
        [sys.executable, "-c", _LIST_MODULES, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )
    return set(json.loads(result.stdout))


HEAVY = {"httpx", "rich", "bs4", "resolvelib", "matplotlib", "tomlkit", "packaging"}


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["resolve", "--help"],
                                  ["install", "--help"], ["cuda", "list", "--help"]])
def test_help_imports_argparse_and_the_parser_only(argv: list[str]) -> None:
    modules = _imported(*argv)
    assert "argparse" in modules
    assert {m for m in modules if m.startswith("stacklock")} == {
        "stacklock", "stacklock.cli", "stacklock.cli.parser", "stacklock.errors"}
    assert not {m.split(".")[0] for m in modules} & HEAVY


def test_a_verb_imports_only_its_own_module() -> None:
    modules = _imported("cuda", "list", "--json")
    verbs = {m for m in modules if m.startswith("stacklock.cli.")}
    assert verbs == {"stacklock.cli.parser", "stacklock.cli.cuda",
                     "stacklock.cli.output"}
    assert not {m.split(".")[0] for m in modules} & {"httpx", "rich", "bs4",
                                                      "resolvelib", "matplotlib"}
