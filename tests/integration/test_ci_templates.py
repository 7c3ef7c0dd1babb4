"""The CI templates, run: docs/ci/stacklock-update.yml's steps and the
pre-commit hook of .pre-commit-hooks.yaml.

The workflow is read with PyYAML and its jobs are played as a runner plays
them: each ``run:`` step is the template's own script under ``bash -e -o
pipefail``, with the workflow's, job's and step's ``env`` (``${{ }}``
expressions filled from the context), ``GITHUB_OUTPUT`` read back into
``steps.<id>.outputs``, and ``if:`` decided from them; the ``uses:`` steps
are what the runner would do (checkout: the test's clone; upload and download
artifact: copying the listed paths). The stacklock steps run this checkout's
stacklock against a loopback nightly index (tests/helpers/nightly.py) in a git
repository whose remote is a bare repository here. Two steps are not run: the
install of stacklock from PyPI (this checkout's is on PATH; its script is
checked by ``bash -n`` and shellcheck) and the pull request, whose every
``gh`` command is parsed by the real gh (``--help`` appended: an unknown flag
fails) while a shell function answers for GitHub.

The hook: ``pre-commit try-repo`` of this repository, offline: pre-commit
clones it and builds the hook's environment with pip from this checkout (no
index, no build isolation, the dependencies from the test's environment on
PYTHONPATH); the hook then passes on a committed lock that is current and
fails on one its profile no longer gives.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts.record_mirror import NIGHTLY_CUTOFF
from tests.helpers.loopback import loopback
from tests.helpers.nightly import NIGHTLY, Quiet, derive_nightly, newest
from tests.helpers.uv import python312

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "stacklock-update.yml"
BIN = Path(sys.executable).parent  # this checkout's stacklock, gh, shellcheck
NOT_RUN = {"Install stacklock": "installs from PyPI",
           "Open or refresh the pull request": "talks to GitHub"}


def _git(cwd: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def _lookup(path: str, context: dict[str, Any]) -> str:
    value: Any = context
    for part in path.split("."):
        value = value[part]
    return str(value)


def _fill(text: str, context: dict[str, Any]) -> str:
    """``${{ a.b.c }}`` replaced by its value: the only expressions the
    template writes outside ``if:``."""
    def one(match: re.Match[str]) -> str:
        return _lookup(match.group(1), context)

    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", one, text)


def _holds(condition: str, context: dict[str, Any]) -> bool:
    """An ``if:`` of the forms the template writes: comparisons of a context
    value with a string, joined by ``||``; anything else fails the test, so a
    new form is taught here before it is trusted."""
    found = []
    for part in condition.split("||"):
        match = re.fullmatch(r"\s*([\w.-]+)\s*(==|!=)\s*'([^']*)'\s*", part)
        assert match, f"an if: this test does not read: {condition}"
        value = _lookup(match.group(1), context)
        found.append((value == match.group(3)) == (match.group(2) == "=="))
    return any(found)


def _run_job(name: str, workflow: dict[str, Any], *, workspace: Path,
             env: dict[str, str], overrides: dict[str, str], artifacts: Path,
             needs: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Play job ``name``; returns ``{"steps": ..., "outputs": ..., "ran": [step
    names], "failed": (step name, exit code, output) or None}``."""
    job = workflow["jobs"][name]
    context: dict[str, Any] = {
        "env": {}, "steps": {}, "needs": needs,
        "github": {"token": "not-a-token", "workspace": str(workspace),
                   "event": {"repository": {"default_branch": "main"}}}}
    context["env"] = {**{k: _fill(str(v), context) for k, v in
                         {**workflow.get("env", {}), **job.get("env", {})}.items()},
                      **overrides}
    result: dict[str, Any] = {"ran": [], "failed": None, "logs": {}}
    if "if" in job and not _holds(job["if"], context):
        return {**result, "skipped": True, "outputs": {}}
    for step in job["steps"]:
        label = step.get("name") or step.get("uses")
        if "if" in step and not _holds(step["if"], context):
            continue
        if "uses" in step:
            _uses(step, context, workspace, artifacts)
            result["ran"].append(label)
            continue
        script = step["run"]
        step_env = {k: _fill(str(v), context) for k, v in step.get("env", {}).items()}
        output = tmp / f"output-{len(result['ran'])}"
        output.write_text("")
        run_env = {**env, **context["env"], **step_env,
                   "GITHUB_OUTPUT": str(output), "GITHUB_WORKSPACE": str(workspace),
                   "RUNNER_TEMP": str(tmp / "runner-temp")}
        if label in NOT_RUN:
            result["checked"] = [*result.get("checked", []), label]
            if label == "Open or refresh the pull request":
                done = _gh_checked(script, workspace, run_env, tmp)
                result["gh"] = done
            continue
        done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o",
                               "pipefail", "-c", script], cwd=workspace,
                              env=run_env, capture_output=True, text=True)
        result["ran"].append(label)
        result["logs"][label] = done.stdout + done.stderr
        if "id" in step:
            pairs = [line.split("=", 1) for line in output.read_text().splitlines()]
            context["steps"][step["id"]] = {"outputs": dict(pairs)}
        if done.returncode != 0:
            result["failed"] = (label, done.returncode, done.stdout + done.stderr)
            break
    result["outputs"] = {k: _fill(str(v), context) for k, v in
                         job.get("outputs", {}).items()}
    return result


def _uses(step: dict[str, Any], context: dict[str, Any], workspace: Path,
          artifacts: Path) -> None:
    action = step["uses"].split("@")[0]
    given = {k: _fill(str(v), context) for k, v in step.get("with", {}).items()}
    if action == "actions/checkout":
        assert (workspace / ".git").exists()  # the test's clone
    elif action == "actions/upload-artifact":
        for line in given["path"].split():
            (artifacts / line).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(workspace / line, artifacts / line)  # must exist
    elif action == "actions/download-artifact":
        shutil.copytree(artifacts, workspace, dirs_exist_ok=True)
    else:
        raise AssertionError(f"a step this test does not play: {step['uses']}")


def _gh_checked(script: str, workspace: Path, env: dict[str, str],
                tmp: Path) -> list[list[str]]:
    """The pull request step with GitHub answered by a shell function: each
    ``gh`` command is first parsed by the real gh (``--help`` appended: exit
    0 only if every flag exists), then recorded; ``gh pr view`` answers
    ``$GH_PR_STATE``. Returns the recorded commands, one list per run, for a
    branch with no pull request and one with an open one."""
    calls = []
    for state in ("", "OPEN"):
        log = tmp / f"gh-{state or 'none'}.log"
        log.unlink(missing_ok=True)
        prelude = ('gh() { command gh "$@" --help > /dev/null || exit 90; '
                   'printf "%s\\n" "$*" >> "$GH_LOG"; '
                   'if [ "$1 $2" = "pr view" ]; then '
                   'printf "%s\\n" "$GH_PR_STATE"; fi; }\n')
        done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o",
                               "pipefail", "-c", prelude + script], cwd=workspace,
                              env={**env, "GH_LOG": str(log), "GH_PR_STATE": state,
                                   "GH_CONFIG_DIR": str(tmp / "gh-config")},
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        calls.append(log.read_text().splitlines())
    return calls


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def test_the_workflow_is_what_a_runner_reads(workflow: dict[str, Any]) -> None:
    """Triggers, the GPU runner for --validate and the split of rights: the
    job that runs tonight's nightly code reads only; the job that pushes and
    opens the pull request runs no stacklock."""
    assert workflow[True]["schedule"][0]["cron"]  # PyYAML reads `on:` as True
    assert "workflow_dispatch" in workflow[True]
    assert workflow["permissions"] == {}
    update, pull = workflow["jobs"]["update"], workflow["jobs"]["pull-request"]
    assert update["runs-on"][0] == "self-hosted" and "gpu" in update["runs-on"]
    assert update["permissions"] == {"contents": "read"}
    assert pull["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert "--validate" in workflow["env"]["VALIDATE"]
    assert not any(re.search(r"^\s*stacklock\s", s.get("run", ""), re.M)
                   for s in pull["steps"])
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "run" not in step:
                continue
            assert "${{" not in step["run"]  # values reach scripts as env only
            assert subprocess.run(["bash", "-n", "-c", step["run"]]).returncode == 0
            lint = subprocess.run([str(BIN / "shellcheck"), "-s", "bash", "-"],
                                  input=step["run"], capture_output=True, text=True)
            assert lint.returncode == 0, (step.get("name"), lint.stdout)


def test_the_workflow_updates_opens_a_pull_request_then_rests(
        workflow: dict[str, Any], tmp_path: Path) -> None:
    served = tmp_path / "served"
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    python = Path(python312(tmp_path))  # the scratch venv's interpreter
    env = {**os.environ, "PATH": f"{BIN}:{python.parent}:{os.environ['PATH']}",
           "HOME": str(tmp_path / "home"), "STACKLOCK_CACHE_DIR":
           str(tmp_path / "cache-last-week"), "UV_CACHE_DIR": str(tmp_path / "uv"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for name in ("STACKLOCK_ARCHIVE", "GH_TOKEN", "GITHUB_TOKEN"):
        env.pop(name, None)
    (tmp_path / "runner-temp").mkdir()
    with loopback(partial(Quiet, directory=str(served))) as base:
        derive_nightly(served, base, NIGHTLY_CUTOFF)  # last week's pages
        _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
        _git(tmp_path, "clone", "-q", str(origin), str(work))
        (work / "profiles").mkdir()
        (work / "profiles" / "nightly.toml").write_text(
            '[target]\npython = "3.12"\n\n[[index]]\nname = "pytorch-nightly-cu130"'
            f'\nurl = "{base}/whl/nightly/cu130"\npackages = {list(NIGHTLY)!r}\n\n'
            f"[requirements]\npackages = {list(NIGHTLY)!r}\n"
            f"prereleases = {list(NIGHTLY)!r}\n".replace("'", '"'))
        (work / "oracle.py").write_text("import torch, torchaudio\n")
        subprocess.run([str(BIN / "stacklock"), "resolve", "nightly", "-q"], cwd=work,
                       env=env, check=True)
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "-m", "last week's lock")
        _git(work, "push", "-q", "origin", "main")
        week_ago = (work / "locks" / "pylock.nightly.toml").read_bytes()

        derive_nightly(served, base, "2999-01-01T00:00:00Z")  # today's pages
        env["STACKLOCK_CACHE_DIR"] = str(tmp_path / "cache")
        overrides = {"PROFILE": "nightly", "VALIDATE": "--validate --allow-no-gpu",
                     "ORACLE": "python oracle.py"}
        artifacts = tmp_path / "artifact"
        artifacts.mkdir()
        play = partial(_run_job, "update", workflow, workspace=work, env=env,
                       overrides=overrides, artifacts=artifacts, needs={})
        first = play(tmp=tmp_path)
        assert first["failed"] is None, first["failed"]
        assert first["outputs"] == {"exit-code": "4"}, first["logs"]
        assert "Keep the new lock and the summary" in first["ran"]
        assert first["checked"] == ["Install stacklock"]
        summary = (artifacts / "update.md").read_text()
        assert summary.startswith("# stacklock update nightly: ")
        assert "(not validated)" not in summary  # --validate ran, and passed
        for project in NIGHTLY:
            if newest(project, NIGHTLY_CUTOFF) != newest(project):
                assert newest(project) in summary, project

        # the second job, on a fresh clone, with the artifact
        clone = tmp_path / "pr"
        _git(tmp_path, "clone", "-q", str(origin), str(clone))
        pr = _run_job("pull-request", workflow, workspace=clone, env=env,
                      overrides=overrides, artifacts=artifacts,
                      needs={"update": {"outputs": first["outputs"]}}, tmp=tmp_path)
        assert pr["failed"] is None, pr["failed"]
        pushed = _git(origin, "show", "stacklock/update:locks/pylock.nightly.toml")
        assert pushed.encode() == (artifacts / "locks" /
                                   "pylock.nightly.toml").read_bytes() != week_ago
        message = _git(origin, "log", "-1", "--format=%B", "stacklock/update")
        assert message.startswith("stacklock update nightly\n\nstacklock update "
                                  "nightly: ")
        no_pr, open_pr = pr["gh"]
        assert no_pr[0].startswith("pr view stacklock/update --json state")
        assert no_pr[1] == ("pr create --head stacklock/update --base main --title "
                            "stacklock update nightly --body-file update.md")
        assert open_pr[1] == ("pr edit stacklock/update --title stacklock update "
                              "nightly --body-file update.md")
        again_clone = tmp_path / "pr-again"
        _git(tmp_path, "clone", "-q", str(origin), str(again_clone))
        failing = _run_job("pull-request", workflow, workspace=again_clone, env=env,
                           overrides=overrides, artifacts=artifacts,
                           needs={"update": {"outputs": {"exit-code": "1"}}},
                           tmp=tmp_path)
        assert failing["gh"][0][1].startswith(
            "pr create --head stacklock/update --base main --title stacklock "
            "update nightly: validation failed --body-file")

        # merged: the next night changes nothing, and no pull request follows
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "-m", "merge the update")
        again = play(tmp=tmp_path)
        assert again["outputs"] == {"exit-code": "0"}, again["logs"]
        assert "Keep the new lock and the summary" not in again["ran"]
        rest = _run_job("pull-request", workflow, workspace=clone, env=env,
                        overrides=overrides, artifacts=artifacts,
                        needs={"update": {"outputs": again["outputs"]}},
                        tmp=tmp_path)
        assert rest.get("skipped") is True
        assert _git(work, "status", "--porcelain") == ""  # nothing written

    # the index is gone: exit 3, the job fails (to be tried again)
    env["STACKLOCK_CACHE_DIR"] = str(tmp_path / "cache-offline")
    gone = play(tmp=tmp_path)
    assert gone["failed"] is not None and gone["failed"][:2] == ("stacklock update", 3)
    assert "try again later" in gone["failed"][2]


# -- the pre-commit hook ------------------------------------------------------

WHEELS = ROOT / "tests" / "data" / "install" / "wheels"


def test_the_pre_commit_hook_passes_a_current_lock_and_fails_a_stale_one(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "profiles").mkdir(parents=True)
    shutil.copytree(WHEELS, tmp_path / "wheels")
    profile = repo / "profiles" / "small.toml"
    profile.write_text(
        f'[target]\npython = "{sys.version_info.major}.{sys.version_info.minor}"'
        f'\n\n[[index]]\nname = "folder"\nurl = "{(tmp_path / "wheels").as_uri()}"'
        '\nkind = "flat"\n\n[requirements]\npackages = ["six", "idna"]\n')
    paths = sysconfig.get_paths()
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}",
           "STACKLOCK_CACHE_DIR": str(tmp_path / "cache"),
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit"),
           # the hook's environment from this checkout, offline
           "PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1", "PIP_NO_BUILD_ISOLATION": "0",
           "PYTHONPATH": os.pathsep.join(dict.fromkeys((paths["purelib"],
                                                         paths["platlib"]))),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run([str(BIN / "stacklock"), "resolve", "small", "-q"], cwd=repo,
                   env=env, check=True)
    _git(repo.parent, "init", "-q", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "a profile and its lock")

    def hook() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "pre-commit"), "try-repo", str(ROOT),
                               "stacklock-resolve-check", "--all-files"], cwd=repo,
                              env=env, capture_output=True, text=True)

    current = hook()
    assert current.returncode == 0, current.stdout + current.stderr
    assert re.search(r"stacklock resolve --check\.+Passed", current.stdout)
    profile.write_text(profile.read_text().replace('"six", "idna"',
                                                   '"six", "idna", "iniconfig"'))
    stale = hook()
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert re.search(r"stacklock resolve --check\.+Failed", stale.stdout)
    assert "locks/pylock.small.toml is not what resolving small writes now" in \
        stale.stdout
