"""The text report of a bisect (``--json`` is :meth:`BisectResult.to_dict`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stacklock.bisect.changes import Change, Group
    from stacklock.bisect.run import BisectResult, Culprit
    from stacklock.bisect.steps import Step

__all__ = ["render_bisect", "render_groups", "render_step"]

_TIES = 3  # requirements shown per group; a torch group has dozens


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


def render_groups(groups: Sequence[Group]) -> str:
    """The groups, numbered in search order, each with what ties it."""
    lines = [f"{counted(len(groups), 'group')} of changes, from the packages' own "
             "requirements:"]
    for i, group in enumerate(groups, start=1):
        lines.append(f"  {i:>3}. " + "; ".join(map(str, group.changes)))
        lines += [f"         tied: {tie}" for tie in group.ties[:_TIES]]
        if len(group.ties) > _TIES:
            lines.append(f"         (and {len(group.ties) - _TIES} more ties; "
                         "--json lists them)")
    return "\n".join(lines) + "\n"


def _applied(step: Step, total: int) -> str:
    if not step.applied:
        return "GOOD"
    if len(step.applied) == total:
        return "BAD"
    shown = ", ".join(step.applied[:4])
    more = f" (+{len(step.applied) - 4})" if len(step.applied) > 4 else ""
    return f"GOOD + {shown}{more} at BAD"


def render_step(step: Step, total: int) -> str:
    """One line per step: number, state, exit code, seconds, bytes, what moved."""
    code = "-" if step.exit_code is None else str(step.exit_code)
    took = f"{step.seconds:.1f}s" if step.ran else "-"
    install = f"{step.install_seconds:.1f}s" if step.install_seconds else "-"
    samples = f" [{', '.join(f'{s:g}' for s in step.samples)}]" if step.samples else ""
    note = f"  ({step.note})" if step.note else ""
    again = " (from the log)" if step.resumed else ""
    return (f"  step {step.number:>2}  {step.state:<10} exit {code:>3}  oracle "
            f"{took:>7}  install {install:>6}  fetched {_size(step.bytes_fetched):>8}"
            f"  {_applied(step, total)}{samples}{note}{again}")


def _change_lines(changes: Sequence[Change], indent: str) -> list[str]:
    return [f"{indent}{c}  ({c.kind})" for c in changes]


def _culprit(c: Culprit) -> list[str]:
    lines = ["culprit:" if len(c.changes) == 1 else
             "culprit (these changes break only together):"]
    lines += _change_lines(c.changes, "  ")
    if c.moved:
        lines.append("  moved with it (required by it or by what it replaces):")
        lines += _change_lines(c.moved, "    ")
    checks = []
    checks.append("GOOD with it applied fails" if c.confirmed
                  else "GOOD with it applied was not confirmed to fail")
    checks.append({True: "BAD with it reverted passes",
                   False: "BAD still fails with it reverted",
                   None: "BAD with it reverted could not be tested"}[c.verified])
    lines.append("  verified: " + "; ".join(checks))
    if c.ambiguous:
        lines.append("  (skipped states left these changes together)")
    return lines


def render_bisect(result: BisectResult, *, steps: bool = True) -> str:
    total = len({n for g in result.groups for n in g.names})
    lines = []
    if steps:
        lines.append("steps:")
        lines += [render_step(s, total) for s in result.steps]
    if result.stopped:
        lines.append(f"no culprit: {result.stopped}")
    for culprit in result.culprits:
        lines += _culprit(culprit)
    if result.last_good and result.first_bad:
        lines.append(f"last good: {result.last_good}")
        lines.append(f"first bad: {result.first_bad}")
    lines += [f"note: {n}" for n in result.notes]
    fetched = sum(s.bytes_fetched for s in result.steps)
    lines.append(f"{counted(result.oracle_runs, 'oracle run')}, "
                 f"{counted(len(result.groups), 'group')}, {_size(fetched)} fetched "
                 "by the steps, "
                 f"{_size(result.metadata_bytes)} read for METADATA")
    return "\n".join(lines) + "\n"
