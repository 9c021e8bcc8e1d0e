"""A sweep's own figures, per N instead of per arm (reference arms stay out of them):
prefill throughput per N, latency against throughput across N, and a request timeline of the
step that matters most (the first failing one, or the deepest).

Colours come from the step's ``correct`` and from each request's judged status
(``judge.views``, read from ``report.findings``); nothing is re-judged.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from batchprobe.judge.views import RequestStatus, RequestView, RequestViews
from batchprobe.report._compare_sweep import Curve
from batchprobe.report._plots import _COLOURS, _TEXT, Figure, _plain_log, _svg
from batchprobe.results.findings import FindingKind
from batchprobe.results.models import Report, SessionResult
from batchprobe.results.sweep import SweepStep

_LANES = 96  # a timeline draws at most this many requests (the first to start)
_HARD, _CROSS_TALK = "#c62828", "#8e24aa"
_STATUS = {RequestStatus.SOFT: "#f9a825", RequestStatus.NOT_JUDGED: "#9e9e9e",
           RequestStatus.OK: "#66bb6a"}


def _steps(report: Report) -> list[SweepStep]:
    env = report.envelope
    return sorted(env.steps, key=lambda s: s.n) if env is not None else []


def _axes(height: float = 3.0) -> tuple[MplFigure, Axes]:
    fig = MplFigure(figsize=(4.6, height))
    ax = fig.subplots()
    ax.tick_params(labelsize=_TEXT)
    return fig, ax


def _p99_ms(report: Report, step: SweepStep, which: str) -> float | None:
    arm = report.arm(step.arm)
    dist = getattr(arm.metrics, which) if arm is not None and arm.metrics is not None else None
    return None if dist is None else float(dist.p99) * 1000


def prefill_per_n_figure(report: Report) -> Figure | None:
    points = [(s.n, s.prefill_tokens_per_s, s.correct) for s in _steps(report)
              if s.prefill_tokens_per_s is not None]
    if not points:
        return None
    fig, ax = _axes()
    ax.plot([n for n, _, _ in points], [v for _, v, _ in points], color="#424242", linewidth=1.2)
    for n, value, correct in points:
        ax.scatter([n], [value], color=_COLOURS[correct], s=36, zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_xticks([n for n, _, _ in points], [str(n) for n, _, _ in points])
    ax.minorticks_off()
    ax.set_xlabel("N", fontsize=_TEXT)
    ax.set_ylabel("prefill tok/s", fontsize=_TEXT)
    ax.set_ylim(bottom=0)
    return Figure("plot-prefill-n", "Prefill throughput per N", _svg(fig),
                  "Each step's prefill tok/s; green correct, red wrong, grey not judged.")


def latency_throughput_figure(report: Report) -> Figure | None:
    """TTFT and ITL p99 against aggregate decode tok/s, one point per step, labelled by N."""
    steps = [s for s in _steps(report) if s.decode_tokens_per_s is not None]
    if len(steps) < 2:
        return None
    fig, ax = _axes()
    for which, label, colour, marker in (("ttft_s", "TTFT p99", "#6a1b9a", "s"),
                                         ("itl_s", "ITL p99", "#ef6c00", "^")):
        points = [(s.decode_tokens_per_s or 0.0, v, s) for s in steps
                  if (v := _p99_ms(report, s, which)) is not None]
        if not points:
            continue
        ax.plot([x for x, _, _ in points], [y for _, y, _ in points], color=colour,
                marker=marker, markersize=5, linewidth=1.2, label=label)
        for x, y, step in points:
            ax.annotate(f"N={step.n}", (x, y), xytext=(3, 3), textcoords="offset points",
                        fontsize=_TEXT, color=_COLOURS[step.correct])
    if not ax.lines:
        return None
    _plain_log(ax)
    ax.set_xlabel("agg decode tok/s", fontsize=_TEXT)
    ax.set_ylabel("ms (log)", fontsize=_TEXT)
    ax.legend(fontsize=_TEXT, loc="best", framealpha=0.85)
    return Figure("plot-latency-throughput", "Latency against throughput across N", _svg(fig),
                  "What each step's throughput cost in latency: p99 of its sessions against its "
                  "aggregate decode tok/s; the label's colour is the step's correctness.")


def _timeline_step(report: Report) -> SweepStep | None:
    env = report.envelope
    steps = _steps(report)
    if env is not None and env.first_failing_n is not None:
        return env.step(env.first_failing_n)
    return steps[-1] if steps else None


def _colour(view: RequestView) -> str:
    """A lane's colour: its judged status (``judge.views``), cross-talk apart."""
    if view.status is RequestStatus.FAILED:
        return _CROSS_TALK if FindingKind.CROSS_TALK in view.kinds else _HARD
    return _STATUS[view.status]


def _bad_chunk_s(s: SessionResult) -> float | None:
    """When its first bad chunk arrived: its first token plus the gaps before that chunk."""
    if s.check is None or s.check.passed or s.check.token is None or s.first_token_s is None:
        return None
    return s.first_token_s + sum(s.itl_s[: max(s.check.token, 0)])


def timeline_figure(report: Report) -> Figure | None:
    """Requests as lanes over the step's time, coloured by their check, with the moment each
    one's first bad chunk came."""
    step = _timeline_step(report)
    arm = report.arm(step.arm) if step is not None else None
    if step is None or arm is None or not arm.sessions:
        return None
    sessions = sorted(arm.sessions, key=lambda s: s.start_s)[:_LANES]
    fig, ax = _axes(min(9.0, 1.2 + 0.09 * len(sessions)))
    views = RequestViews(report)
    for lane, s in enumerate(sessions):
        ax.barh(lane, s.end_s - s.start_s, left=s.start_s, height=0.7,
                color=_colour(views.of(arm.spec.name, s)))
        bad = _bad_chunk_s(s)
        if bad is not None:
            ax.plot([bad], [lane], marker="x", color="#000000", markersize=5)
    ax.invert_yaxis()
    ax.set_yticks([])
    ax.set_ylabel(f"{len(sessions)} requests, by start", fontsize=_TEXT)
    ax.set_xlabel(f"seconds since {arm.spec.name} began", fontsize=_TEXT)
    more = f" (the first {_LANES} of {len(arm.sessions)})" if len(arm.sessions) > _LANES else ""
    return Figure("plot-timeline", f"Request timeline of {arm.spec.name} (N={step.n})", _svg(fig),
                  f"Each request{more} as a lane from its start to its end: red a hard finding, "
                  "purple cross-talk, yellow a soft one, grey not judged, green judged and "
                  "fine; × marks "
                  "the moment its first bad chunk arrived. Overlapping lanes ran together.")


SWEEP_BUILDERS = (latency_throughput_figure, prefill_per_n_figure, timeline_figure)


_RUN_COLOURS = ("#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#5d4037", "#ad1457")


def overlay_figure(curves: list[Curve]) -> Figure | None:
    """`compare` of sweeps: every run's tok/s by N, each failing region shaded in its colour."""
    if not curves:
        return None
    fig, ax = _axes(3.4)
    ns: set[int] = set()
    for i, curve in enumerate(curves):
        colour = _RUN_COLOURS[i % len(_RUN_COLOURS)]
        points = [(p, p.tokens_per_s) for p in curve.points if p.tokens_per_s is not None]
        ns |= {p.n for p in curve.points}
        ax.plot([p.n for p, _ in points], [rate for _, rate in points], color=colour,
                linewidth=1.4, label=curve.label)
        for p, rate in points:
            ax.scatter([p.n], [rate], s=36, zorder=3, marker="D" if p.bisect else "o",
                       facecolors="white" if p.correct is False else colour,
                       edgecolors=_COLOURS[False] if p.correct is False else colour,
                       linewidths=1.6)
        if curve.first_failing_n is not None:
            ax.axvspan(curve.first_failing_n, max(ns) * 1.3, color=colour, alpha=0.10,
                       hatch="//", zorder=0)
            ax.axvline(curve.first_failing_n, color=colour, linestyle="--", linewidth=1.2)
    if not ns:
        return None
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(ns) / 1.3, max(ns) * 1.3)
    ax.set_xticks(sorted(ns), [str(n) for n in sorted(ns)])
    ax.minorticks_off()
    ax.set_xlabel("N: requests in flight (log2)", fontsize=_TEXT)
    ax.set_ylabel("agg decode tok/s", fontsize=_TEXT)
    ax.set_ylim(bottom=0)
    legend = ax.legend(fontsize=_TEXT, loc="upper left", framealpha=0.85)
    for text in legend.get_texts():
        # The labels are the user's (--label, file stems): literal text, never mathtext, so
        # a "$x$" shows as typed instead of failing to parse.
        text.set_parse_math(False)
    failing = [f"{c.label} from N={c.first_failing_n}" for c in curves if c.first_failing_n]
    where = ("Hatched, in the run's colour: where it answered wrong (" + "; ".join(failing)
             + "); hollow red-edged points are wrong steps.") if failing else (
        "Every run answered correctly at every step.")
    return Figure("plot-overlay", "Throughput per N, every run", _svg(fig),
                  f"Aggregate decode tok/s per N of each run's sweep. {where}")
