"""``python -m stacklock``: the same as the ``stacklock`` command."""

from __future__ import annotations

import sys

from stacklock.cli import main

sys.exit(main())
