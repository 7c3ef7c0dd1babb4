"""``python -m stacklock``: the same as the ``stacklock`` command."""

from __future__ import annotations

from stacklock.cli import run

run()
