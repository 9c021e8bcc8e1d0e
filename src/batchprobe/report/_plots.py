"""The HTML report's plots: matplotlib (Agg) figures as inline SVG, one builder per figure.

Each builder takes the typed report and returns a :class:`Figure`, or None when the report has
nothing for it to show. The sweep's envelope (throughput and latency per N with the
correctness boundary) is the last builder in ``FIGURE_BUILDERS``; the page shows it in its
own section, beside the table of steps.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass

from matplotlib import rc_context
from matplotlib.axes import Axes

# A bare Figure draws with the Agg/SVG canvases directly: no pyplot, no global backend or
# figure manager to set up or leak.
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from batchprobe.judge.checks import arm_correct, run_checks
from batchprobe.results.models import ArmMetrics, ArmResult, Distribution, Report
from batchprobe.results.sweep import Envelope, SweepStep

_COLOURS = {True: "#2e7d32", False: "#c62828", None: "#9e9e9e"}
_PERCENTILES = (("p50", "#1565c0"), ("p90", "#42a5f5"), ("p99", "#90caf9"))
# Points: a 4.6-inch figure fills a 390-px phone's column at about 1.05 px per point, so 10
# points is at least 10 px there.
_TEXT = 10.0
_SVG_SIZE = re.compile(r'<svg([^>]*?) width="[^"]+" height="[^"]+"')


@dataclass(frozen=True)
class Figure:
    key: str  # the element id in the page
    title: str
    svg: str
    caption: str
    svg_narrow: str | None = None  # a phone's layout of the same figure (the page picks by CSS)


def _svg(fig: MplFigure) -> str:
    buffer = io.StringIO()
    # Text stays text (no glyph outlines, no font files); no date, so the file is reproducible.
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "batchprobe"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    # Scale with the page (the viewBox keeps the aspect ratio) instead of fixed points.
    return _SVG_SIZE.sub(r'<svg\1 width="100%" preserveAspectRatio="xMidYMid meet"', text, 1)


def _arm_labels(arms: list[ArmResult]) -> list[str]:
    return [f"{a.spec.name}" for a in arms]


_CROWDED = 5  # more arms than this (a sweep's steps): slanted labels, smaller bar values


def _axes(unit: str, bars: int = 0) -> tuple[MplFigure, Axes]:
    # One small figure per plot: the page puts two in a row on a desktop, one on a phone,
    # so the text stays legible at either width.
    fig = MplFigure(figsize=(4.6, 3.0))
    ax = fig.subplots()
    ax.set_ylabel(unit, fontsize=_TEXT)  # the page gives the title
    crowded = bars > _CROWDED
    ax.tick_params(axis="x", labelsize=_TEXT, rotation=40 if crowded else 15)
    ax.tick_params(axis="y", labelsize=_TEXT)
    return fig, ax


def _slant(ax: Axes, bars: int) -> None:
    """Anchor slanted tick labels at their right end, under their bar (set after the ticks)."""
    if bars > _CROWDED:
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")


def _throughput(report: Report, key: str, title: str, unit: str,
                get: Callable[[ArmMetrics], float | None]) -> Figure | None:
    arms = [a for a in report.arms if a.metrics is not None]
    values = [get(a.metrics) for a in arms if a.metrics is not None]
    if not any(v is not None for v in values):
        return None
    checks = run_checks(report)
    correct = [arm_correct(checks, a.spec.name) for a in arms]
    fig, ax = _axes(unit, len(arms))
    bars = ax.bar(_arm_labels(arms), [v or 0.0 for v in values],
                  color=[_COLOURS[c] for c in correct])
    _slant(ax, len(arms))
    crowded = len(arms) > _CROWDED
    for bar, value in zip(bars, values):
        text = "no data" if value is None else f"{value:.0f}" if crowded else f"{value:.1f}"
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=_TEXT,
                    rotation=90 if crowded and value is not None and value >= 1000 else 0)
    ax.margins(y=0.15)
    wrong = [a.spec.name for a, c in zip(arms, correct) if c is False]
    boundary = (f"answers went wrong in {', '.join(wrong)} (red)" if wrong
                else "every measured arm answered correctly (green)")
    return Figure(key, f"{title} per arm", _svg(fig),
                  f"Coloured by the arm's correctness: {boundary}.")


def decode_figure(report: Report) -> Figure | None:
    return _throughput(report, "plot-decode", "Aggregate decode throughput", "tok/s",
                       lambda m: m.decode_tokens_per_s)


def prefill_figure(report: Report) -> Figure | None:
    return _throughput(report, "plot-prefill", "Prefill throughput", "tok/s",
                       lambda m: m.prefill_tokens_per_s)


def _latency(report: Report, key: str, title: str,
             get: Callable[[ArmMetrics], Distribution | None]) -> Figure | None:
    arms = [a for a in report.arms if a.metrics is not None and get(a.metrics) is not None]
    if not arms:
        return None
    fig, ax = _axes("ms", len(arms))
    width = 0.8 / len(_PERCENTILES)
    for i, (pct, colour) in enumerate(_PERCENTILES):
        values = []
        for arm in arms:
            dist = get(arm.metrics) if arm.metrics else None
            values.append(getattr(dist, pct) * 1000 if dist is not None else 0.0)
        ax.bar([x + (i - 1) * width for x in range(len(arms))], values, width=width,
               color=colour, label=pct)
    ax.set_xticks(range(len(arms)), _arm_labels(arms))
    _slant(ax, len(arms))
    ax.margins(y=0.12)
    # Above the bars, in one row: a corner legend would hide the first arm's bars.
    ax.legend(fontsize=_TEXT, ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              frameon=False)
    return Figure(key, f"{title} per arm", _svg(fig), "p50, p90 and p99 over the arm's sessions.")


def ttft_figure(report: Report) -> Figure | None:
    return _latency(report, "plot-ttft", "Time to first token", lambda m: m.ttft_s)


def itl_figure(report: Report) -> Figure | None:
    return _latency(report, "plot-itl", "Inter-token latency", lambda m: m.itl_s)


ENVELOPE_KEY = "plot-envelope"
_TTFT, _ITL, _LOAD, _KNEE, _CAP = "#6a1b9a", "#ef6c00", "#455a64", "#1565c0", "#00838f"


def _step_latency(report: Report, step: SweepStep, which: str) -> float | None:
    arm = report.arm(step.arm)
    dist = getattr(arm.metrics, which) if arm is not None and arm.metrics is not None else None
    return None if dist is None else float(dist.p99) * 1000


def _mark_n(ax: Axes, n: int, colour: str, style: str, text: str, height: float,
            left: bool = False) -> None:
    """A vertical line at ``n``, labelled at ``height`` (axes fraction), right (or left) of it."""
    ax.axvline(n, color=colour, linestyle=style, linewidth=1.2, zorder=1)
    top = height > 0.5
    ax.annotate(text, (n, height), xycoords=("data", "axes fraction"),
                xytext=(-3 if left else 3, 0), textcoords="offset points", fontsize=_TEXT,
                color=colour, ha="right" if left else "left", va="top" if top else "bottom",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})


def _plain(value: float, _pos: object = None) -> str:
    return f"{value:g}"


def _plain_log(ax: Axes) -> None:
    """A log y axis labelled 5, 10, 20, 50 ... (not 10^1): one reads milliseconds off it."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))


def _regions(ax: Axes, env: Envelope, low: float, high: float) -> None:
    """Correct region green, failing region red (from the first failing N on)."""
    if env.largest_correct_n is not None:
        ax.axvspan(low, env.largest_correct_n, color=_COLOURS[True], alpha=0.08, zorder=0)
    if env.first_failing_n is not None:
        ax.axvspan(env.first_failing_n, high, color=_COLOURS[False], alpha=0.10, zorder=0)
        ax.axvline(env.first_failing_n, color=_COLOURS[False], linewidth=1.6, zorder=1)


def _throughput_panel(ax: Axes, env: Envelope, steps: list[SweepStep]) -> None:
    ns = [s.n for s in steps]
    rates = [s.decode_tokens_per_s for s in steps]
    ax.plot([n for n, r in zip(ns, rates) if r is not None], [r for r in rates if r is not None],
            color="#424242", linewidth=1.2, zorder=2)
    for step in steps:
        if step.decode_tokens_per_s is None:
            continue
        colour = _COLOURS[step.correct]
        if step.kind == "bisect":  # hollow diamonds: a depth the bisection added
            ax.scatter([step.n], [step.decode_tokens_per_s], marker="D", s=42, zorder=3,
                       facecolors="white", edgecolors=colour, linewidths=1.8)
        else:
            ax.scatter([step.n], [step.decode_tokens_per_s], marker="o", s=42, zorder=3,
                       color=colour)
    if env.baseline_decode_tokens_per_s is not None:
        ax.axhline(env.baseline_decode_tokens_per_s, color="#757575", linestyle="--",
                   linewidth=1)
        ax.annotate(f"serial baseline {env.baseline_decode_tokens_per_s:.0f}",
                    (0.99, env.baseline_decode_tokens_per_s),
                    xycoords=("axes fraction", "data"), xytext=(0, -3),
                    textcoords="offset points", fontsize=_TEXT, color="#616161", ha="right",
                    va="top")
    ax.set_ylabel("agg decode tok/s", fontsize=_TEXT)
    ax.set_ylim(bottom=0)
    ax.margins(y=0.25)


def _latency_panel(ax: Axes, report: Report, steps: list[SweepStep]) -> None:
    for which, label, colour, marker in (("ttft_s", "TTFT p99", _TTFT, "s"),
                                         ("itl_s", "ITL p99", _ITL, "^")):
        points = [(s.n, v) for s in steps if (v := _step_latency(report, s, which)) is not None]
        if points:
            ax.plot([n for n, _ in points], [v for _, v in points], color=colour,
                    marker=marker, markersize=5, linewidth=1.2, label=label, zorder=3)
    if ax.lines:
        _plain_log(ax)
        ax.margins(y=0.15)
        ax.legend(fontsize=_TEXT, loc="best", framealpha=0.85)
    ax.set_ylabel("ms (log)", fontsize=_TEXT)


def _load_panel(ax: Axes, steps: list[SweepStep]) -> bool:
    loaded = [s for s in steps if s.server_load is not None]
    ns = [s.n for s in steps]
    ax.plot(ns, ns, color="#bdbdbd", linestyle=":", linewidth=1, label="N sent")
    ax.plot(ns, [s.client_overlap_max for s in steps], color="#8d6e63", marker="x",
            markersize=5, linewidth=1, label="in flight max (client count)")
    if loaded:
        ax.plot([s.n for s in loaded], [s.server_load.running_max for s in loaded
                                        if s.server_load is not None],
                color=_LOAD, marker="o", markersize=4, linewidth=1.2, label="running max (server gauge)")
    ax.set_yscale("log", base=2)
    # Powers of two only: 5 and 6 beside 4 and 8 would crowd the narrow panel.
    ticks = [2**i for i in range(max(ns).bit_length()) if 2**i <= max(ns)]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))
    ax.set_ylabel("in flight", fontsize=_TEXT)
    ax.legend(fontsize=_TEXT, loc="upper left", framealpha=0.85)
    return bool(loaded)


def _draw_envelope(fig: MplFigure, axes: list[Axes], report: Report, env: Envelope,
                   steps: list[SweepStep], wide: bool) -> bool:
    """The three panels on ``axes``; whether the server reported its running gauge."""
    top, mid, low = axes
    ns = [s.n for s in steps]
    left, right = min(ns) / 1.3, max(ns) * 1.3
    _throughput_panel(top, env, steps)
    _latency_panel(mid, report, steps)
    has_load = _load_panel(low, steps)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlim(left, right)
        _regions(ax, env, left, right)
        ax.tick_params(labelsize=_TEXT)
        ax.grid(True, which="major", axis="y", color="#eeeeee", linewidth=0.8)
        if wide or ax is low:
            ax.set_xticks(ns, [str(n) for n in ns])
            ax.minorticks_off()
            ax.set_xlabel("N: requests in flight (log2)", fontsize=_TEXT)
    if env.knee_n is not None:
        _mark_n(top, env.knee_n, _KNEE, ":", f"knee {env.knee_n}", 0.12)
    if env.engine_cap is not None:
        _mark_n(low, env.engine_cap, _CAP, "-.", f"engine cap {env.engine_cap}", 0.02)
        if env.engine_cap != env.knee_n:
            top.axvline(env.engine_cap, color=_CAP, linestyle="-.", linewidth=1, zorder=1)
    if env.first_failing_n is not None:
        pinned = " (pinned)" if env.threshold_pinned else ""
        _mark_n(top, env.first_failing_n, _COLOURS[False], "-",
                f"first failing N={env.first_failing_n}{pinned}", 0.02, left=True)
    if not wide:
        fig.align_ylabels(axes)
    fig.tight_layout(h_pad=0.6, w_pad=1.2)
    return has_load


def _envelope_svgs(report: Report, env: Envelope, steps: list[SweepStep]) -> tuple[str, str, bool]:
    """The desktop layout (three panels in a row, at the page's width) and the phone's (three
    stacked, narrow enough that its text is at least 10 px on a 390-px screen)."""
    wide = MplFigure(figsize=(11.0, 3.6))
    has_load = _draw_envelope(wide, list(wide.subplots(1, 3)), report, env, steps, True)
    narrow = MplFigure(figsize=(4.6, 7.0))
    axes = list(narrow.subplots(3, 1, sharex=True, height_ratios=(3, 2.2, 1.8)))
    _draw_envelope(narrow, axes, report, env, steps, False)
    return _svg(wide), _svg(narrow), has_load


def envelope_figure(report: Report) -> Figure | None:
    env = report.envelope
    steps = sorted(env.steps, key=lambda s: s.n) if env is not None else []
    if env is None or not steps:
        return None
    wide, narrow, has_load = _envelope_svgs(report, env, steps)
    parts = ["Aggregate decode tok/s per N (filled circles: sweep steps, hollow diamonds: "
             "bisection steps; green correct, red wrong, grey not judged), the serial "
             "baseline dashed; TTFT and ITL p99 of each step's sessions; what was in flight "
             "(the client's count" + (", and the server's running gauge)" if has_load else ")")
             + "."]
    if env.first_failing_n is not None:
        parts.append(f"Red from N={env.first_failing_n}: the first depth with wrong answers"
                     + (" (pinned by bisection)." if env.threshold_pinned else "."))
    elif env.largest_correct_n is not None:
        parts.append(f"Every step answered correctly up to N={env.largest_correct_n} (green).")
    if env.knee_n is not None:
        parts.append(f"Knee at N={env.knee_n}.")
    if env.engine_cap is not None:
        parts.append(f"The server ran at most {env.engine_cap} at once (engine cap).")
    return Figure(ENVELOPE_KEY, "Capacity envelope per N", wide, " ".join(parts), narrow)


FIGURE_BUILDERS: tuple[Callable[[Report], Figure | None], ...] = (
    decode_figure,
    prefill_figure,
    ttft_figure,
    itl_figure,
    envelope_figure,
)


def figures(report: Report) -> list[Figure]:
    """A sweep's figures per N (its reference arms stay out), or else the per-arm bars."""
    from batchprobe.report._sweep_plots import SWEEP_BUILDERS

    swept = report.envelope is not None and bool(report.envelope.steps)
    builders = (*SWEEP_BUILDERS, envelope_figure) if swept else FIGURE_BUILDERS
    return [f for build in builders if (f := build(report)) is not None]
