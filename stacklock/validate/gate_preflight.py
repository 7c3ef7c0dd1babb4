"""Gate preflight: the server's arguments, checked by the SGLang installed in the venv
before a server is launched.

SGLang rejects an unknown or misspelt flag only once ``launch_server`` runs, which on
a large model is after the user waited for it to be scheduled. Its parser is built by
``sglang.srt.server_args.ServerArgs.add_cli_args`` (plugins loaded first, as
``launch_server`` does); ``_probe_script.py sglang-args`` builds the same parser in
the venv's python and asks argparse, which reads no model and touches no GPU. A typo
fails in seconds, with argparse's own words.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from stacklock.runner import SubprocessRunner
from stacklock.validate.checks import FAIL, PASS, CheckResult
from stacklock.validate.probes import PROBE_SCRIPT, last_json

if TYPE_CHECKING:
    from pathlib import Path

    from stacklock.runner import Runner

__all__ = ["check_server_args"]


def check_server_args(python: Path, argvs: dict[str, list[str]], *,
                      env: dict[str, str], timeout: float = 300.0,
                      runner: Runner | None = None) -> CheckResult:
    """``argvs``: phase name -> the arguments ``launch_server`` will get."""
    names = list(argvs)
    cmd = [str(python), str(PROBE_SCRIPT), "sglang-args",
           json.dumps([argvs[n] for n in names])]
    rc, stdout = (runner or SubprocessRunner()).capture(cmd, env=env, timeout=timeout)
    data = last_json(stdout)
    if data is None or "error" in data:
        why = data["error"] if data else (
            f"exit {rc}, no answer (a python that does not run, or one past "
            f"{timeout:.0f} s)" if rc == 127 else f"exit {rc}, no answer")
        return CheckResult(name="gate-preflight", status=FAIL,
                           reason=f"SGLang's server arguments cannot be read in "
                           f"{python}: {why}")
    version = data.get("sglang") or "(unknown version)"
    bad = [f"{name}: {result['error']}" for name, result
           in zip(names, data["results"], strict=True) if not result["ok"]]
    if bad:
        return CheckResult(name="gate-preflight", status=FAIL,
                           reason=f"sglang {version} rejects the server arguments "
                           f"({'; '.join(bad)})",
                           details={"sglang": version, "argv": argvs})
    return CheckResult(name="gate-preflight", status=PASS,
                       reason=f"sglang {version}'s own parser accepts the "
                       f"{' and '.join(names)} server arguments",
                       details={"sglang": version, "argv": argvs})
