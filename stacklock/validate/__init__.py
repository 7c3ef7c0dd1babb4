"""Validate an installed stack against its lock: named checks, GPU probes, and the
throughput gate, with a JSON/Markdown/PNG report.

``validate(lock, venv=...)`` (:mod:`stacklock.validate.run`) returns a
:class:`ValidateResult`; ``result.ok`` is the verdict. The names below load on first
use (PEP 562). The ``[validate]`` table itself is a shared model
(:mod:`stacklock.validation`): profiles and locks read it without this verb.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stacklock.validate.checks import CheckResult
    from stacklock.validate.gate import GateResult
    from stacklock.validate.probes import ProbeResult
    from stacklock.validate.report import ValidateResult, render_markdown, render_text
    from stacklock.validate.run import (
        read_distributions,
        validate,
        validate_install,
        venv_python,
    )

_WHERE = {
    "CheckResult": "checks",
    "GateResult": "gate",
    "ProbeResult": "probes",
    "ValidateResult": "report",
    "read_distributions": "run",
    "render_markdown": "report",
    "render_text": "report",
    "validate": "run",
    "validate_install": "run",
    "venv_python": "run",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        module = importlib.import_module(f"stacklock.validate.{_WHERE[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CheckResult",
    "GateResult",
    "ProbeResult",
    "ValidateResult",
    "read_distributions",
    "render_markdown",
    "render_text",
    "validate",
    "validate_install",
    "venv_python",
]
