"""Bisect two locks: which change between them breaks the stack?

``stacklock bisect GOOD BAD -- CMD`` takes the semantic diff of two locks as the
candidate changes, groups the ones whose requirements tie them together
(:mod:`~stacklock.bisect.changes`), and searches by delta debugging
(:mod:`~stacklock.bisect.search`) over intermediate environments: GOOD's
entries for some groups, BAD's for the others (:mod:`~stacklock.bisect.mix`),
installed into a scratch venv and judged by the oracle
(:mod:`~stacklock.bisect.oracle`): the user's command, or the validation gate's
throughput measured ``--repeat`` times. Every step is logged
(:mod:`~stacklock.bisect.steps`), so an interrupted bisect resumes;
:mod:`~stacklock.bisect.run` ties it together, with the pieces of other verbs
(the diff, the install) passed in.

``BisectResult.to_dict()`` (``--json``) is stable, for scripts::

    {"good": "path", "bad": "path",
     "culprit": [{"name": "numpy", "change": "upgraded",     # the first culprit's
                  "old": "1.26.3", "new": "2.2.1"}, ...],    # changes, then what
                                                             # moved with them
     "culprits": [{"changes": [...], "moved-with-it": [...],
                   "verified": true | false | null,          # BAD without it passes
                   "confirmed": true,                        # GOOD with it fails
                   "ambiguous": false}],                     # skips left it wider
     "groups": [{"changes": [...],
                 "ties": ["torchvision 0.26.0 requires torch==2.11.0", ...]}],
     "steps": [{"step": 1, "applied": ["numpy", ...],        # at BAD; the rest GOOD
                "state": "good" | "bad" | "skip" | "incoherent",
                "exit_code": 0 | null, "seconds": 0.8, "install_seconds": 1.1,
                "bytes_fetched": 0, "samples": [96.1, ...],  # --gate: tok/s
                "note": "", "lock": "bisect/steps/001/pylock.step-001.toml",
                "ran": true, "resumed": false}],
     "oracle_runs": 8, "bytes_fetched": 0, "metadata_bytes": 0,
     "last_good": "bisect/pylock.last-good.toml" | null,
     "first_bad": "bisect/pylock.first-bad.toml" | null,
     "stopped": null | "why no culprit was named", "notes": []}
"""

from __future__ import annotations

from stacklock.bisect.changes import TOOLKIT, Change, Group
from stacklock.bisect.oracle import CommandOracle, GateOracle
from stacklock.bisect.render import render_bisect, render_groups, render_step
from stacklock.bisect.run import BisectResult, Culprit, Tools, bisect_locks
from stacklock.bisect.steps import Step

__all__ = [
    "TOOLKIT",
    "BisectResult",
    "Change",
    "CommandOracle",
    "Culprit",
    "GateOracle",
    "Group",
    "Step",
    "Tools",
    "bisect_locks",
    "render_bisect",
    "render_groups",
    "render_step",
]
