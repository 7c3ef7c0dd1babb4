"""Ansible callback plugin: what happened to each host, as ``<fleet dir>/<host>/
ansible.json``, so the fleet table can say why a host failed or was unreachable.

Loaded by ``ansible-playbook`` itself (``stacklock fleet install`` points
ANSIBLE_CALLBACK_PLUGINS here and enables it), so it imports only Ansible and the
standard library: the interpreter running Ansible need not have stacklock. The
folder comes from STACKLOCK_FLEET_DIR; without it the plugin does nothing. A host's
report files from an earlier run are removed at its first result, so a host that
fails before the fetch never shows a stale report.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: stacklock_fleet
    type: aggregate
    short_description: record each host's outcome for stacklock fleet
    description:
      - Writes STACKLOCK_FLEET_DIR/<host>/ansible.json at the end of the playbook.
    requirements:
      - STACKLOCK_FLEET_DIR set in the environment
"""

STALE = ("report.json", "report.md", "ansible.json")


def _part(result: Any, name: str) -> Any:
    """ansible-core 2.19 has public properties; earlier releases the private ones."""
    try:
        return getattr(result, name)
    except AttributeError:
        return getattr(result, "_" + name)


def _why(res: dict[str, Any]) -> str:
    """One line: the module's message and the last line it wrote to stderr."""
    for item in res.get("results") or ():  # a loop: the first item that failed
        if isinstance(item, dict) and (item.get("failed") or item.get("unreachable")):
            return _why(item)
    parts = []
    msg = str(res.get("msg") or "").strip().splitlines()
    if msg:
        parts.append(msg[0].strip().rstrip("."))
    # a command's last stderr line is its error; a module that never started
    # (no interpreter) says why on the first line of the shell's stderr
    for key, line in (("stderr", -1), ("module_stderr", 0), ("module_stdout", 0)):
        text = str(res.get(key) or "").strip().splitlines()
        if text:
            parts.append(text[line].strip())
            break
    if not parts and "rc" in res:
        parts.append(f"exit code {res['rc']}")
    return ": ".join(parts) or "failed without a message"


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "stacklock_fleet"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dir = os.environ.get("STACKLOCK_FLEET_DIR") or None
        self._hosts: dict[str, dict[str, Any]] = {}

    def _note(self, result: Any, status: str) -> None:
        if self._dir is None:
            return
        host = _part(result, "host").get_name()
        task = _part(result, "task").get_name()
        entry = self._hosts.get(host)
        if entry is None:
            entry = self._hosts[host] = {"host": host, "status": "ok", "tasks": []}
            for name in STALE:
                path = os.path.join(self._dir, host, name)
                if os.path.exists(path):
                    os.unlink(path)
        res = _part(result, "result")
        if status == "ok" and res.get("changed"):
            status = "changed"
        entry["tasks"].append({"task": task, "status": status})
        if status in ("failed", "unreachable") and entry["status"] == "ok":
            entry.update(status=status, task=task, why=_why(res))

    def v2_runner_on_ok(self, result: Any) -> None:
        self._note(result, "ok")

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._note(result, "ok" if ignore_errors else "failed")

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._note(result, "unreachable")

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._note(result, "skipped")

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if self._dir is None:
            return
        for host, entry in self._hosts.items():
            folder = os.path.join(self._dir, host)
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ansible.json.")
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(entry, out, indent=2, sort_keys=True)
                out.write("\n")
            os.replace(tmp, os.path.join(folder, "ansible.json"))
