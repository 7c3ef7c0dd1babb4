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

``UpdateResult.to_dict()`` is ``--json``'s ``stacklock.update/1``: its fields
are in docs/formats.md and ``docs/schemas/update.schema.json`` (``culprit`` is
bisect's first culprit's changes and what moved with them).
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
