"""The HTML report's plots: matplotlib (Agg) figures as inline SVG, one builder per figure.

Each builder takes the typed report and returns a :class:`Figure`, or None when the report has
nothing for it to show. A later figure (the sweep's envelope: throughput per N with the
correctness boundary) is one more builder in ``FIGURE_BUILDERS``.
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

from batchprobe.results.checks import arm_correct, run_checks
from batchprobe.results.models import ArmMetrics, ArmResult, Distribution, Report

_COLOURS = {True: "#2e7d32", False: "#c62828", None: "#9e9e9e"}
_PERCENTILES = (("p50", "#1565c0"), ("p90", "#42a5f5"), ("p99", "#90caf9"))
_SVG_SIZE = re.compile(r'<svg([^>]*?) width="[^"]+" height="[^"]+"')


@dataclass(frozen=True)
class Figure:
    key: str  # the element id in the page
    title: str
    svg: str
    caption: str


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


def _axes(unit: str) -> tuple[MplFigure, Axes]:
    # One small figure per plot: the page puts two in a row on a desktop, one on a phone,
    # so the text stays legible at either width.
    fig = MplFigure(figsize=(4.6, 3.0))
    ax = fig.subplots()
    ax.set_ylabel(unit, fontsize=9)  # the page gives the title
    ax.tick_params(axis="x", labelsize=9, rotation=15)
    ax.tick_params(axis="y", labelsize=9)
    return fig, ax


def _throughput(report: Report, key: str, title: str, unit: str,
                get: Callable[[ArmMetrics], float | None]) -> Figure | None:
    arms = [a for a in report.arms if a.metrics is not None]
    values = [get(a.metrics) for a in arms if a.metrics is not None]
    if not any(v is not None for v in values):
        return None
    checks = run_checks(report)
    correct = [arm_correct(checks, a.spec.name) for a in arms]
    fig, ax = _axes(unit)
    bars = ax.bar(_arm_labels(arms), [v or 0.0 for v in values],
                  color=[_COLOURS[c] for c in correct])
    for bar, value in zip(bars, values):
        text = "no data" if value is None else f"{value:.1f}"
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=9)
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
    fig, ax = _axes("ms")
    width = 0.8 / len(_PERCENTILES)
    for i, (pct, colour) in enumerate(_PERCENTILES):
        values = []
        for arm in arms:
            dist = get(arm.metrics) if arm.metrics else None
            values.append(getattr(dist, pct) * 1000 if dist is not None else 0.0)
        ax.bar([x + (i - 1) * width for x in range(len(arms))], values, width=width,
               color=colour, label=pct)
    ax.set_xticks(range(len(arms)), _arm_labels(arms))
    ax.legend(fontsize=8)
    return Figure(key, f"{title} per arm", _svg(fig), "p50, p90 and p99 over the arm's sessions.")


def ttft_figure(report: Report) -> Figure | None:
    return _latency(report, "plot-ttft", "Time to first token", lambda m: m.ttft_s)


def itl_figure(report: Report) -> Figure | None:
    return _latency(report, "plot-itl", "Inter-token latency", lambda m: m.itl_s)


FIGURE_BUILDERS: tuple[Callable[[Report], Figure | None], ...] = (
    decode_figure,
    prefill_figure,
    ttft_figure,
    itl_figure,
)


def figures(report: Report) -> list[Figure]:
    return [f for build in FIGURE_BUILDERS if (f := build(report)) is not None]
