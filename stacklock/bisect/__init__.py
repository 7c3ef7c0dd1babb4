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

``BisectResult.to_dict()`` is ``--json``'s ``stacklock.bisect/1``, stable for
scripts: its fields are in docs/formats.md and ``docs/schemas/bisect.schema.json``.
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
