"""The validation report: ``report.json`` (everything), ``report.md`` (a summary to
read or paste) and ``throughput.png`` (output tok/s against concurrency, baseline vs
speculative: where the lines cross is the load above which speculation stops paying).

The plots need matplotlib (with numpy, ~60 MB), the ``plots`` extra: without it
the report is written all the same, and report.md says in one line how to get them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stacklock._fs import atomic_write_bytes, atomic_write_text
from stacklock.validate.checks import FAIL, MEASURED, PASS, SKIP, STATUSES, CheckResult
from stacklock.validate.gate import GateResult
from stacklock.validate.probes import ProbeResult

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = [
    "MAX_REPORT_BYTES",
    "PLOTS_HINT",
    "REPORT_VERSION",
    "ValidateResult",
    "count_statuses",
    "has_matplotlib",
    "plot_allreduce",
    "plot_throughput",
    "read_report",
    "render_markdown",
    "render_text",
    "write_report",
]

REPORT_VERSION = 2  # 2: "measured" checks, per-chunk and per-token ITL, warm-up
_MARK = {"pass": "PASS", "fail": "FAIL", "skip": "skip", "measured": "measured"}
NOTHING_CHECKED = "nothing checked"
PLOTS_HINT = "plots need matplotlib: pip install 'stacklock[plots]'"


@dataclass(frozen=True, kw_only=True)
class ValidateResult:
    lock: str | None
    python: str
    checks: tuple[CheckResult, ...] = ()
    venv_info: dict[str, Any] = field(default_factory=dict)
    probes: ProbeResult | None = None
    gate: GateResult | None = None
    files: tuple[str, ...] = ()

    @property
    def all_checks(self) -> tuple[CheckResult, ...]:
        return self.checks + (self.gate.checks if self.gate else ())

    @property
    def ok(self) -> bool:
        return not any(c.status == FAIL for c in self.all_checks)

    @property
    def checked(self) -> bool:
        """Something was checked: a check passed or measured (all skipped is not
        a pass)."""
        return any(c.status in (PASS, MEASURED) for c in self.all_checks)

    @property
    def verdict(self) -> str:
        """"fail", "pass", or "nothing checked" when every check was skipped."""
        if not self.ok:
            return "fail"
        return "pass" if self.checked else NOTHING_CHECKED

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == "pass" else 1

    def to_dict(self) -> dict[str, Any]:
        counts = {s: sum(c.status == s for c in self.all_checks) for s in STATUSES}
        return {
            "report_version": REPORT_VERSION,
            "verdict": self.verdict,
            "counts": counts,
            "lock": self.lock,
            "python": self.python,
            "checks": [c.to_dict() for c in self.checks],
            "venv": self.venv_info,
            "probes": self.probes.to_dict() if self.probes else None,
            "gate": self.gate.to_dict() if self.gate else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidateResult:
        if data.get("report_version") != REPORT_VERSION:
            raise ValueError(f"report_version {data.get('report_version')!r} is not "
                             f"{REPORT_VERSION}")
        return cls(
            lock=data.get("lock"), python=data["python"],
            checks=tuple(CheckResult.from_dict(c) for c in data["checks"]),
            venv_info=dict(data.get("venv") or {}),
            probes=(ProbeResult.from_dict(data["probes"]) if data.get("probes")
                    else None),
            gate=GateResult.from_dict(data["gate"]) if data.get("gate") else None,
        )


MAX_REPORT_BYTES = 16 << 20


def read_report(path: Path) -> dict[str, Any] | None:
    """A report.json written by validate, as its dict (checked by
    :meth:`ValidateResult.from_dict`); None when there is none, or it is not
    one (too large, not JSON, another report version): a report is read back
    only to be shown beside a new one."""
    from stacklock.bounded import Malformed, parse_json, read_regular

    try:
        found = parse_json(read_regular(path, limit=MAX_REPORT_BYTES))
        if not isinstance(found, dict):
            return None
        ValidateResult.from_dict(found)
    except (OSError, Malformed, ValueError, KeyError, TypeError):
        return None
    return found


def _check_rows(checks: tuple[CheckResult, ...]) -> list[str]:
    rows = ["| check | result | reason |", "|---|---|---|"]
    for c in checks:
        reason = c.reason.replace("|", "\\|")
        if c.notes:
            reason += " (" + "; ".join(n.replace("|", "\\|") for n in c.notes) + ")"
        rows.append(f"| {c.name} | {_MARK.get(c.status, c.status)} | {reason} |")
    return rows


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render_markdown(result: ValidateResult) -> str:
    data = result.to_dict()
    counts = data["counts"]
    lines = [f"# stacklock validate: {data['verdict'].upper()}", "",
             f"- lock: `{result.lock or '(none)'}`", f"- python: `{result.python}`"]
    info = result.venv_info
    if info.get("torch_version"):
        gpus = ", ".join(f"{d['name']} ({d['sm']})" for d in info.get("devices", []))
        lines.append(f"- torch {info['torch_version']} "
                     f"(CUDA {info.get('torch_cuda')}), "
                     f"NCCL {info.get('nccl_version')}, GPUs: {gpus or 'none'}")
    lines += [f"- checks: {_counted(counts)}", "", "## Checks", ""]
    lines += _check_rows(result.checks)
    if result.probes is not None:
        lines += _probe_lines(result.probes)
    if result.gate is not None:
        lines += _gate_lines(result.gate)
    return "\n".join(lines) + "\n"


def _counted(counts: dict[str, int]) -> str:
    return (f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} "
            f"skipped, {counts['measured']} measured (no threshold)")


def count_statuses(checks: tuple[CheckResult, ...]) -> str:
    """"3 passed, 4 skipped": the statuses that occur, in a fixed order."""
    words = {PASS: "passed", FAIL: "failed", SKIP: "skipped",
             MEASURED: "measured (no threshold)"}
    parts = [f"{n} {words[s]}" for s in STATUSES
             if (n := sum(c.status == s for c in checks))]
    return ", ".join(parts) or "no checks"


def _probe_lines(p: ProbeResult) -> list[str]:
    lines: list[str] = []
    if p.allreduce:
        lines += ["", f"## NCCL all-reduce ({p.world} GPUs, bf16, slowest rank, "
                  "NVLink multicast off)", "",
                  "| size | eager us | CUDA graph us | bus GB/s |", "|---|---|---|---|"]
        for r in p.allreduce:
            d = r.to_dict()
            lines.append(f"| {d['size']} | {_fmt(r.eager_us, '.2f')} | "
                         f"{_fmt(r.graph_us, '.2f')} | {_fmt(r.busbw_gbps, '.1f')} |")
    elif p.allreduce_skipped:
        lines += ["", "## NCCL all-reduce", "", f"Skipped: {p.allreduce_skipped}."]
    if p.matmul_tflops:
        rates = ", ".join(f"{t:.0f}" for t in p.matmul_tflops)
        lines += ["", f"bf16 matmul {p.matmul_n}x{p.matmul_n}x{p.matmul_n}: "
                  f"{rates} TFLOP/s (per GPU)"]
    if p.errors:
        lines += ["", "Probe notes: " + "; ".join(p.errors)]
    return lines


def _gate_lines(gate: GateResult) -> list[str]:
    lines = ["", "## Throughput gate", ""]
    lines += _check_rows(gate.checks)
    shown = ", ".join(f"{k}={'(unset)' if v is None else v}"
                      for k, v in sorted(gate.server_env.items()))
    if shown:
        lines += ["", f"Server environment: {shown}."]
    warm = sorted({p.warmup_requests for p in gate.phases})
    lines += ["", f"Medians; warm-up requests per phase, not measured: "
              f"{', '.join(map(str, warm)) or '0'}. ITL per chunk is the gap between "
              "streamed chunks; ITL per token is (last chunk - first) / tokens after "
              "the first chunk.", "",
              "| phase | concurrency | output tok/s | TTFT ms | ITL ms per chunk | "
              "ITL ms per token | tokens per chunk | accept length | completed |",
              "|---|---|---|---|---|---|---|---|---|"]
    for phase in gate.phases:
        for lv in phase.levels:
            lines.append(
                f"| {phase.name} | {lv.concurrency} | {lv.tokens_per_second:.1f} | "
                f"{_fmt(lv.ttft_ms.get('median'), '.1f')} | "
                f"{_fmt(lv.itl_chunk_ms.get('median'), '.2f')} | "
                f"{_fmt(lv.itl_token_ms.get('median'), '.2f')} | "
                f"{_fmt(lv.tokens_per_chunk, '.2f')} | "
                f"{_fmt(lv.accept_length or phase.accept_length, '.2f')} | "
                f"{lv.completed}/{lv.requests} |")
    return lines


def render_text(result: ValidateResult) -> str:
    """The terminal summary: one line per check, then the verdict."""
    width = max((len(c.name) for c in result.all_checks), default=0)
    lines = [f"{_MARK.get(c.status, c.status):8}  {c.name:<{width}}  {c.reason}"
             for c in result.all_checks]
    for name in result.files:
        lines.append(f"report: {name}")
    counts = result.to_dict()["counts"]
    verdict = result.verdict.upper()
    if result.ok and result.lock is None:
        passed = [c.name for c in result.all_checks if c.status in (PASS, MEASURED)]
        verdict += f" without a LOCK (checked: {', '.join(passed) or 'nothing'})"
    lines.append(f"{verdict}: {_counted(counts)}")
    if result.ok and result.lock is None:
        lines.append("pass the LOCK the venv was installed from to check the venv "
                     "against it")
    elif result.verdict == NOTHING_CHECKED:
        lines.append("every check was skipped: see the reasons above")
    return "\n".join(lines)


def _axes(title: str, xlabel: str, ylabel: str):  # type: ignore[no-untyped-def]
    """A headless figure (Agg) and its one set of axes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig, ax, path: Path) -> Path:  # type: ignore[no-untyped-def]
    import io

    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return atomic_write_bytes(path, buf.getvalue(), shared=True)


def plot_throughput(gate: GateResult, path: Path) -> Path | None:
    """tok/s against concurrency per phase; None when there is nothing to plot."""
    phases = [p for p in gate.phases if p.levels]
    if not phases:
        return None
    from matplotlib.ticker import ScalarFormatter

    fig, ax = _axes(f"{gate.config.get('model') or 'gate'}: output tok/s",
                    "concurrency (requests in flight)", "output tokens/s")
    for phase in phases:
        xs = [lv.concurrency for lv in phase.levels]
        ys = [lv.tokens_per_second for lv in phase.levels]
        ax.plot(xs, ys, marker="o", label=phase.name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({lv.concurrency for p in phases for lv in p.levels}))
    ax.get_xaxis().set_major_formatter(ScalarFormatter())
    return _save(fig, ax, path)


def plot_allreduce(probes: ProbeResult, path: Path) -> Path | None:
    """All-reduce latency against message size (log-log), eager and in a CUDA graph."""
    if not probes.allreduce:
        return None
    fig, ax = _axes(f"NCCL all-reduce, {probes.world} GPU(s)",
                    "message size (KB, bf16)", "latency per all-reduce (us)")
    xs = [r.bytes / 1024 for r in probes.allreduce]
    ax.plot(xs, [r.eager_us for r in probes.allreduce], marker="o", label="eager")
    graph = [r.graph_us for r in probes.allreduce if r.graph_us is not None]
    if len(graph) == len(xs):
        ax.plot(xs, graph, marker="s", label="CUDA graph")
    ax.axvline(42, color="grey", linestyle="--", linewidth=1, label="42 KB")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    return _save(fig, ax, path)


def has_matplotlib() -> bool:
    """Whether matplotlib (the ``plots`` extra) is installed here. Found but
    broken is not hidden: plotting then fails as loudly as any other error."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def write_report(result: ValidateResult, folder: Path) -> tuple[str, ...]:
    """report.json, report.md, allreduce.png (with probes) and throughput.png (with
    a gate) in ``folder``; the plots only where matplotlib can be imported, else
    report.md ends with :data:`PLOTS_HINT`."""
    import json

    plots: list[tuple[Callable[[Any, Path], Path | None], Any, str]] = []
    if result.probes is not None and result.probes.allreduce:
        plots.append((plot_allreduce, result.probes, "allreduce.png"))
    if result.gate is not None and any(p.levels for p in result.gate.phases):
        plots.append((plot_throughput, result.gate, "throughput.png"))
    can_plot = not plots or has_matplotlib()
    markdown = render_markdown(result)
    if not can_plot:
        markdown += f"\n{PLOTS_HINT}\n"
    text = json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n"
    written = [
        atomic_write_text(folder / "report.json", text, shared=True),
        atomic_write_text(folder / "report.md", markdown, shared=True),
    ]
    for plot, data, name in plots if can_plot else ():
        png = plot(data, folder / name)
        if png is not None:
            written.append(png)
    return tuple(str(p) for p in written)
