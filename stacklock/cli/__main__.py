"""``python -m stacklock.cli``: the same as the ``stacklock`` command."""

from __future__ import annotations

import sys

from stacklock.cli import main

sys.exit(main())
