"""Validate an installed stack against its lock: named checks, GPU probes, and the
throughput gate, with a JSON/Markdown/PNG report.

:func:`stacklock.validate.run.validate` (a lock, a venv) returns a
:class:`~stacklock.validate.report.ValidateResult`; ``result.ok`` is the verdict.
Import from the module that defines a name: this package imports nothing. The
``[validate]`` table itself is a shared model (:mod:`stacklock.validation`):
profiles and locks read it without this verb.
"""
