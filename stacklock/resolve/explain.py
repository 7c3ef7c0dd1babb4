"""Say why a profile has no resolution, in the words pip users know.

The explanation names each requirement in the conflict (which package asked for
which versions of which project, and whether an override wrote it), the versions
that exist for the target, why the others were skipped, and what to try.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from stacklock.words import counted, first

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stacklock.resolve.model import Requirement
    from stacklock.resolve.rules import Rules
    from stacklock.resolve.source import PackageSource

__all__ = ["explain_conflict", "explain_refused_build"]

_SHOWN_VERSIONS = 8


def explain_conflict(causes: Sequence[Any], source: PackageSource, rules: Rules,
                     *, profile: str) -> str:
    """``causes`` are resolvelib ``RequirementInformation`` items."""
    by_name: dict[str, list[Requirement]] = defaultdict(list)
    for info in causes:
        req: Requirement = info.requirement
        if req not in by_name[req.name]:
            by_name[req.name].append(req)
    lines = [f"profile {profile!r} has no resolution for the target.",
             "The conflict is caused by:"]
    hints: list[str] = []
    missing = {name: _close(name, source) for name in sorted(by_name)
               if name not in rules.direct and _on_no_index(name, source)}
    for name in sorted(by_name):
        reqs = by_name[name]
        grouped: dict[tuple[str, str, str], list[Requirement]] = defaultdict(list)
        for req in reqs:  # one line for many versions of one parent
            parent = (req.parent or "").rsplit(" ", 1)[0]
            grouped[(parent, req.text, req.overridden or "")].append(req)
        for (_, text, overridden), same in sorted(grouped.items()):
            verb = "requires" if len(same) == 1 else "require"
            lines.append(f"    {_who(same)} {verb} {text or same[0].identifier}"
                         + (f" (override of {overridden})" if overridden else "")
                         + ("" if name in missing else _fits(same[0], source, rules)))
        constraint = rules.constraint_for(name)
        if constraint:
            lines.append(f"    the profile's constraints allow {name}{constraint}")
        lines.append("    " + _available(name, source, rules)
                     + (f" (did you mean {missing[name]}?)" if missing.get(name)
                        else ""))
        if len(reqs) > 1 and name not in rules.overrides and name not in rules.direct:
            hints.append(f'add an override such as "{name}{_loosest(reqs)}" to '
                         "[requirements] overrides (it replaces every requirement"
                         f" on {name})")
    lines.append("To fix this you could try to:")
    spelled = [f"correct the name {name} (the indexes list {close})" if close
               else f"check the name {name}: no index lists it" for name, close in
               missing.items()]
    loosen = [] if set(missing) == set(by_name) else [
        "loosen the range of versions in [requirements] packages"]
    steps = [*spelled, *loosen, *hints,
             "check that the [[index]] each project comes from carries the builds "
             "you expect (stacklock resolve --index NAME=URL points one elsewhere)"]
    lines += [f"    {i}. {text}" for i, text in enumerate(steps, 1)]
    return "\n".join(lines)


def explain_refused_build(causes: Sequence[Any], source: PackageSource,
                          *, profile: str) -> tuple[str, str] | None:
    """(message, hint) when the conflict comes from a project with no wheel
    for the target whose sdists the profile's ``no-build`` refuses: one line
    naming that project, which is all a user needs to act on."""
    from stacklock.index.evaluate import SDIST_REASON

    for info in causes:
        req: Requirement = info.requirement
        evaluations = source.evaluate(req.name)
        allowed = [e for e in evaluations if e.version is not None
                   and req.specifier.contains(e.version, prereleases=True)]
        refused = [e for e in allowed if e.reason == SDIST_REASON]
        if refused and not any(e.compatible for e in allowed):
            return (f"profile {profile!r}: {req.name} has no wheel that fits the "
                    f"target, only sdists ({len(refused)}), and [requirements] "
                    f"no-build refuses building it from source "
                    f"(required by {req.parent or 'the profile'})",
                    f"allow building {req.name} (leave it out of no-build), or "
                    f"serve a prebuilt wheel of {req.name} for the target from a "
                    "wheel index or a flat find-links [[index]]")
    return None


def _who(same: Sequence[Requirement]) -> str:
    """"sglang 0.5.9", or "torch 2.11.0, 2.12.0 and 2.13.0" for several."""
    if same[0].parent is None:
        return "the profile"
    if len(same) == 1:
        return same[0].parent
    name = same[0].parent.rsplit(" ", 1)[0]
    versions = sorted({(r.parent or "").rsplit(" ", 1)[-1] for r in same},
                      key=_version_key)
    return f"{name} {', '.join(versions[:-1])} and {versions[-1]}"


def _version_key(text: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(text), text)
    except InvalidVersion:
        return (1, text, text)


def _fits(req: Requirement, source: PackageSource, rules: Rules) -> str:
    """How many versions this requirement alone allows, and the newest."""
    try:
        found = source.compatible(req.name)
    except Exception:  # reported by _available
        return ""
    allow = rules.allows_prerelease(req.name, [req])
    ok = [c for c in found if req.specifier.contains(c.version, prereleases=allow)]
    if not ok:
        return (": no version with a wheel for the target allows it"
                + _yanked(req, source))
    return f": {counted(len(ok), 'version')} allow it, newest {ok[0].version}"


def _yanked(req: Requirement, source: PackageSource) -> str:
    """The yanked versions ``req`` allows, with the reason: PEP 592 lets a
    yanked release be used only where the profile pins it with == or ===."""
    try:
        evaluations = source.evaluate(req.name)
    except Exception:  # reported by _available
        return ""
    yanked: dict[str, str] = {}
    for ev in evaluations:
        if ev.version is not None and ev.link.yanked is not None and \
                req.specifier.contains(ev.version, prereleases=True):
            yanked.setdefault(str(ev.version), ev.link.yanked)
    if not yanked:
        return ""
    shown = ", ".join(f"{v} ({why})" if why else v
                      for v, why in list(yanked.items())[:3])
    return (f"; yanked: {shown}, used only when the profile pins one with == or "
            "===")


def _on_no_index(name: str, source: PackageSource) -> bool:
    try:
        return source.index_for(name) is None
    except Exception:  # unreadable: reported by _available
        return False


def _close(name: str, source: PackageSource) -> str:
    """``requests or requezts``: the names close to ``name`` the indexes list."""
    found = source.close_names(name)
    return " or ".join(found)


def _loosest(reqs: Sequence[Requirement]) -> str:
    """The first requirement's specifier: a starting point, not a verdict."""
    return str(next((r.specifier for r in reqs if r.parent is None),
                    reqs[0].specifier))


def _available(name: str, source: PackageSource, rules: Rules) -> str:
    try:
        found = source.compatible(name)
    except Exception as exc:  # a message about a message
        return f"the versions of {name} could not be read: {exc}"
    if found and found[0].direct is not None:
        return (f"{name} comes only from the profile's direct reference "
                f"{found[0].direct.ref.text} (version {found[0].version})")
    index = source.index_for(name)
    where = f" on index {index.name!r}" if index is not None else ""
    if found:
        allow = name in rules.prereleases
        shown = [str(c.version) for c in found
                 if allow or not c.version.is_prerelease or c is found[0]]
        text = first(shown, _SHOWN_VERSIONS)
        return f"versions of {name} with a wheel for the target{where}: {text}"
    if index is None:
        return f"no index has a project named {name}"
    reasons: Counter[str] = Counter()
    for ev in source.evaluate(name):
        reasons[ev.reason or "not compatible"] += 1
    if not reasons:
        return f"{name} has no files{where}"
    top = "; ".join(f"{n} x {why}" for why, n in reasons.most_common(4))
    return f"no file of {name}{where} fits the target ({top})"
