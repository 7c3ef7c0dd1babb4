"""What ``stacklock install`` prints: the plan and what was done, a rollback."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stacklock.install.fetched import Fetched
    from stacklock.install.run import InstallResult, RollbackResult

__all__ = ["render_install", "render_rollback"]


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    if n < 1000:
        return f"{n} B"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _fetched(fetched: Fetched, files: int) -> str:
    """What the install downloaded: uv's part from its own log, stacklock's
    from its store (:mod:`~stacklock.install.fetched`)."""
    ours = (f"stacklock {_size(fetched.stacklock_bytes)}" if fetched.stacklock_bytes
            else "stacklock nothing")
    if fetched.uv_files is None:
        return f"fetched: uv did not say what it downloaded; {ours}"
    if fetched.uv_files == 0 and not fetched.stacklock_bytes:
        return (f"fetched: nothing (uv had the {_plural(files, 'file')} in its "
                "cache or read them from stacklock's store)")
    return (f"fetched: {_size(fetched.total)} (uv {_plural(fetched.uv_files, 'file')}"
            f", {_size(fetched.uv_bytes)}; {ours})")


def render_install(result: InstallResult) -> str:
    plan = result.plan
    if result.already_installed is not None:
        return "\n".join([
            f"already installed: {plan.venv} (generation {result.already_installed}) "
            f"holds {plan.lock_path} with python {plan.python}; nothing changed",
            *(f"note: {n}" for n in result.notes)])
    verb = "would install" if result.dry_run else "installed"
    lines = [f"{verb} {plan.lock_path} into {plan.venv} (generation "
             f"{plan.generation}, python {plan.python})"]
    if plan.replaces:
        lines.append(f"  replaces {plan.replaces}; snapshot -> {plan.snapshot_path}")
    files = [d for d in plan.downloads if d.kind not in ("vcs", "directory")]
    if result.fetched is not None:
        lines.append(_fetched(result.fetched, len(files)))
    else:  # a plan: what stacklock's store lacks is known, not what uv's cache has
        total = sum(d.size or 0 for d in files)
        lines.append(f"files: {len(files)} ({_size(total)}; "
                     f"{_size(plan.download_bytes)} not in stacklock's store); uv "
                     "downloads those its own cache lacks:")
        for d in plan.downloads:
            state = "in stacklock's store" if d.cached else d.url
            lines.append(f"  {d.kind:7} {d.filename}  {_size(d.size)}  {state}")
    lines.append("commands:")
    lines += ["  " + " ".join(c) for c in plan.commands]
    if plan.runfile_command:
        lines.append("  " + " ".join(plan.runfile_command))
    if plan.toolkit_prefix and plan.toolkit:
        lines.append(f"toolkit CUDA {plan.toolkit.version} -> {plan.toolkit_prefix}")
    lines.append(f"activate: source {plan.venv / plan.activation_path.name}")
    if plan.link_cuda:
        lines.append(f"relink {plan.link_cuda} -> {plan.toolkit_prefix}")
    lines += [f"log {k}: {v}" for k, v in sorted(result.logs.items())]
    if result.validation is not None:
        checks = result.validation.all_checks
        failed = [c.name for c in checks if c.status == "fail"]
        verdict = "FAILED: " + ", ".join(failed) if failed else "ok"
        from stacklock.validate.report import count_statuses

        lines.append(f"validate: {verdict}: {count_statuses(checks)}")
        lines += [f"  skipped {c.name}: {c.reason}" for c in checks
                  if c.status == "skip"]
        if result.validation.files:
            report = Path(result.validation.files[0]).parent
            lines.append(f"  report: {report}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def render_rollback(result: RollbackResult) -> str:
    return (
        f"{result.venv}: generation {result.from_generation} -> "
        f"{result.to_generation} (run install --rollback again to go further back)"
    )
