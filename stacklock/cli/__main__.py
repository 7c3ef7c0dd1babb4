"""``python -m stacklock.cli``: the same as the ``stacklock`` command."""

from __future__ import annotations

from stacklock.cli import run

run()
