"""Validate an installed stack against its lock: named checks, GPU probes, and the
throughput gate, with a JSON/Markdown/PNG report.

:func:`stacklock.validate.run.validate` (a lock, a venv) returns a
:class:`~stacklock.validate.report.ValidateResult`; ``result.ok`` is the verdict.
Import from the module that defines a name: this package imports nothing, since
loading a profile imports :mod:`stacklock.validate.config` to check its
``[validate]`` table, and that must not load the checks, the gate and the report
(httpx, matplotlib).
"""
