"""``stacklock update PROFILE``: one job a scheduler runs to keep a lock current.

It re-resolves the profile (every package, ``--package`` names or patterns, or
only the profile's ``prereleases``) with the native check, and when the lock
changes writes it and a markdown summary for a pull request: the semantic diff,
what the check passed over and why, and with ``--validate`` the new lock
installed into a scratch venv and validated (plus the oracle command after
``--``), its results beside the committed lock's last recorded ones. When that
validation fails, bisect runs between the committed lock and the new one with
the same oracle and the summary names the culprit. Nothing changed: nothing is
written.

The verb borrows resolve, diff, install + validate and bisect. It imports none
of them: ``stacklock/cli/update.py`` hands them in as :class:`UpdateTools`
(the way ``cli/bisect.py`` hands bisect its pieces), so the verbs stay
independent (docs/architecture.md says why).

Exit codes (:data:`UNCHANGED`, :data:`CHANGED`, :data:`FAILING`): 0 nothing
changed, 4 the lock changed (and validated, where asked), 1 it changed and its
validation failed (the culprit in the summary when bisect found one); 2 bad
input, 3 the network, as every verb.

``UpdateResult.to_dict()`` (``--json``)::

    {"schema": "stacklock.update/1", "profile": "...", "lock": "path",
     "state": "unchanged" | "changed" | "failing", "exit_code": 0,
     "released": "all" | "prereleases" | ["torch", ...],
     "resolve_seconds": 1.2, "seconds": 1.3,
     "written": ["locks/pylock.x.toml", "summary.md"],       # nothing: []
     "diff": {...stacklock diff --json...} | null,
     "passed_over": [{"package": "...", "version": "...", "reason": "..."}],
     "validation": {"ok": false, "verdict": "fail", "oracle": ["python", ...],
                    "oracle_exit_code": 1, "error": null,
                    "report": {...validate report.json...} | null,
                    "committed": {...the committed lock's last report...} | null}
                   | null,
     "bisect": {...stacklock bisect --json...} | null,
     "culprit": [{"name": "torchaudio", "change": "upgraded", "old": "...",
                  "new": "..."}]}
"""

from __future__ import annotations

from stacklock.update.run import (
    CHANGED,
    FAILING,
    UNCHANGED,
    UpdateResult,
    UpdateTools,
    Validation,
    update_lock,
)
from stacklock.update.summary import render_summary, render_update

__all__ = [
    "CHANGED",
    "FAILING",
    "UNCHANGED",
    "UpdateResult",
    "UpdateTools",
    "Validation",
    "render_summary",
    "render_update",
    "update_lock",
]
