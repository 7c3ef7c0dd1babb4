"""The update's words: the markdown summary a pull request carries, and the
lines a terminal or CI log shows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stacklock.words import counted

if TYPE_CHECKING:
    from collections.abc import Mapping

    from stacklock.update.run import UpdateResult, Validation

__all__ = ["render_summary", "render_update"]

_MARK = {"pass": "pass", "fail": "**FAIL**", "skip": "skip", "measured": "measured"}


def _changes(result: UpdateResult) -> list[Mapping[str, Any]]:
    return list(result.diff.get("packages") or []) if result.diff else []


def _change_line(c: Mapping[str, Any]) -> str:
    old, new = c.get("old"), c.get("new")
    versions = f"{old} -> {new}" if old and new else (new or old or "")
    return f"{c['name']} {c['change']} {versions}".rstrip()


def _culprit_text(culprit: list[Any]) -> str:
    return ", ".join(_change_line(c) for c in culprit)


def _headline(result: UpdateResult) -> str:
    count = len(_changes(result))
    head = f"stacklock update {result.profile}: {counted(count, 'package change')}"
    if result.diff is None and result.state != "unchanged":
        head = f"stacklock update {result.profile}: a new lock (none to compare with)"
    v = result.validation
    if v is None:
        return head + " (not validated)"
    if v.ok:
        return head + ", validation passed"
    if result.culprit:
        return head + f", validation FAILED; culprit: {_culprit_text(result.culprit)}"
    return head + ", validation FAILED"


def _checks(report: Mapping[str, Any] | None) -> dict[str, str]:
    if not report:
        return {}
    checks = list(report.get("checks") or [])
    checks += list((report.get("gate") or {}).get("checks") or [])
    return {str(c.get("name")): str(c.get("status")) for c in checks}


def _validation_lines(v: Validation) -> list[str]:
    lines = ["## Validation", ""]
    if v.error:
        lines += [f"The new lock could not be validated: {v.error}", ""]
    new, old = _checks(v.report), _checks(v.committed)
    if v.committed is None:
        lines += ["The committed lock has no recorded validation here (it is kept "
                  "by the lock's sha256 once `stacklock update --validate` ran on it).",
                  ""]
    if new or old:
        lines += ["| check | committed lock (last recorded) | new lock |",
                  "|---|---|---|"]
        for name in sorted({*new, *old}):
            before, after = old.get(name, "-"), new.get(name, "-")
            lines.append(f"| {name} | {_MARK.get(before, before)} | "
                         f"{_MARK.get(after, after)} |")
        lines.append("")
    if v.oracle:
        code = v.oracle_exit_code
        lines += [f"Oracle `{' '.join(v.oracle)}`: "
                  + ("passed" if code == 0 else f"failed (exit {code})"), ""]
    return lines


def _bisect_lines(result: UpdateResult) -> list[str]:
    b = result.bisect
    if b is None:
        return [f"- {n}" for n in result.notes] + ([""] if result.notes else [])
    lines = ["## Culprit", ""]
    culprits = list(b.get("culprits") or [])
    if not result.culprit:
        lines += [f"bisect named no culprit: {b.get('stopped') or 'see its log'}", ""]
        return lines
    first = culprits[0] if culprits else {}
    lines.append(f"**{_culprit_text(result.culprit)}** breaks the oracle "
                 f"({b.get('oracle_runs', 0)} runs).")
    lines.append(f"- committed lock with it: "
                 f"{'fails' if first.get('confirmed') else 'not confirmed'}")
    verified = first.get("verified")
    lines.append("- new lock without it: " + (
        "passes" if verified else "still fails" if verified is False else "skipped"))
    for key in ("last_good", "first_bad"):
        if b.get(key):
            lines.append(f"- {key.replace('_', ' ')}: `{b[key]}`")
    return [*lines, ""]


def render_summary(result: UpdateResult) -> str:
    """Markdown for a pull request: headline, the semantic diff, what the
    check passed over, validation side by side, the culprit."""
    lines = [f"# {_headline(result)}", ""]
    released = result.released
    which = released if isinstance(released, str) else ", ".join(released)
    lines += [f"Released: {which}; lock `{result.lock}`.", ""]
    if result.diff_markdown:
        lines += [result.diff_markdown.rstrip(), ""]
    lines += ["## Passed over by the native check", ""]
    if result.passed_over:
        lines += [f"- {p.get('package')} {p.get('version')}: {p.get('reason')}"
                  for p in result.passed_over]
    else:
        lines.append("Nothing: every newest candidate loads.")
    lines.append("")
    if result.validation is not None:
        lines += _validation_lines(result.validation)
    lines += _bisect_lines(result)
    lines.append(f"Regenerate with: `stacklock update {result.profile}`")
    return "\n".join(lines) + "\n"


def render_update(result: UpdateResult) -> str:
    """What a terminal or CI log shows: the headline, each change, what was
    written."""
    if result.state == "unchanged":
        return (f"{result.lock} is up to date with {result.profile} "
                f"({result.seconds:.1f} s); nothing written")
    lines = [_headline(result)]
    lines += [f"  {_change_line(c)}" for c in _changes(result)]
    lines += [f"  passed over: {p.get('package')} {p.get('version')}"
              for p in result.passed_over]
    lines += [f"  note: {n}" for n in result.notes]
    lines += [f"wrote {p}" for p in result.written]
    return "\n".join(lines)
