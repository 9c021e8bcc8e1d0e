"""The sweep's envelope as text, shared by the console, markdown, HTML and JUnit renderers.

Every value is a field of the typed report (``report.envelope``, each step's arm metrics);
nothing is recomputed here, only formatted.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchprobe.results.models import Distribution, Report
from batchprobe.results.sweep import Envelope, SweepStep
from batchprobe.results.throughput import PairedThroughput, SpeedupInterval

STEP_COLUMNS = ("N", "kind", "correct", "requests", "errors", "agg tok/s", "per-session tok/s",
                "speedup", "paired speedup", "efficiency", "mixed speedup", "TTFT p50 / p99", "ITL p50 / p99",
                "running max/mean (server gauge)", "waiting max (server gauge)",
                "in flight max (client count)", "engine RSS MB", "wall s")
# The page's first table of steps (it fits a 1400-px window); the rest go in a second one.
PRIMARY_STEP_COLUMNS = ("N", "kind", "correct", "agg tok/s", "speedup", "paired speedup",
                        "TTFT p50 / p99",
                        "ITL p50 / p99", "wall s")
SECONDARY_STEP_COLUMNS = ("N", *(c for c in STEP_COLUMNS if c not in PRIMARY_STEP_COLUMNS))
# The console's compact table: the columns that say where the envelope bends.
CONSOLE_COLUMNS = ("N", "kind", "correct", "agg tok/s", "speedup", "paired speedup",
                   "TTFT p99", "ITL p99",
                   "server running max", "waiting max", "wall s")
REASON_CHARS = 60


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    detail: str = ""  # longer text (the stop rule's detail), shown folded or truncated


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _ms(dist: Distribution | None, *pcts: str) -> str:
    """``42.2 / 48.8 ms``: the percentiles of one distribution, in milliseconds."""
    if dist is None:
        return "-"
    return " / ".join(f"{getattr(dist, p) * 1000:.1f}" for p in pcts) + " ms"


def truncate(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def correct_mark(step: SweepStep, chars: int = REASON_CHARS) -> str:
    """``✓``, ``✗ <first reason, truncated>``, or ``- <why not judged>``."""
    if step.correct is True:
        return "✓"
    first = truncate(step.reasons[0], chars) if step.reasons else ""
    mark = "✗" if step.correct is False else "-"
    return f"{mark} {first}".rstrip()


def step_label(step: SweepStep) -> str:
    return f"{step.n} (bisect)" if step.kind == "bisect" else str(step.n)


def _load(step: SweepStep) -> tuple[str, str]:
    load = step.server_load
    if load is None:
        return "-", "-"
    waiting = "-" if load.waiting_max is None else str(load.waiting_max)
    return f"{load.running_max} / {load.running_mean:.1f}", waiting


def step_cells(report: Report, step: SweepStep) -> list[str]:
    """One row of the steps table (``STEP_COLUMNS``)."""
    arm = report.arm(step.arm)
    m = arm.metrics if arm is not None else None
    ttft = m.ttft_s if m is not None else None
    itl = m.itl_s if m is not None else None
    running, waiting = _load(step)
    return [
        str(step.n),
        step.kind,
        correct_mark(step),
        str(step.requests),
        str(step.errors),
        _fmt(step.decode_tokens_per_s, ".1f"),
        _fmt(step.per_session_decode_tokens_per_s, ".1f"),
        _fmt(step.speedup, ".2f", "x"),
        interval_text(step.paired_speedup),
        _fmt(None if step.scaling_efficiency is None else step.scaling_efficiency * 100, ".0f",
             "%"),
        _fmt(step.mixed_speedup, ".2f", "x"),
        _ms(ttft, "p50", "p99"),
        _ms(itl, "p50", "p99"),
        running,
        waiting,
        str(step.client_overlap_max),
        _fmt(step.engine_rss_peak_mb, ".0f"),
        f"{step.wall_s:.2f}",
    ]


def findings_mark(report: Report, step: SweepStep) -> str | None:
    """``✗ count broke, recall miss (16 sessions)``: a failing step's hard findings, whole."""
    found = [f for f in report.findings if f.hard and f.arm == step.arm]
    if step.correct is not False or not found:
        return None
    kinds = ", ".join(dict.fromkeys(f.kind.value.replace("_", " ") for f in found))
    sessions = len({s for f in found for s in f.sessions})
    return f"✗ {kinds} ({sessions} session{'s' if sessions != 1 else ''})"


def split_cells(report: Report, step: SweepStep) -> tuple[list[str], list[str]]:
    """One step's cells of the primary and of the secondary table."""
    full = dict(zip(STEP_COLUMNS, step_cells(report, step)))
    full["correct"] = findings_mark(report, step) or correct_mark(step, 48)
    return ([full[c] for c in PRIMARY_STEP_COLUMNS], [full[c] for c in SECONDARY_STEP_COLUMNS])


def console_cells(report: Report, step: SweepStep) -> list[str]:
    """One row of the console's compact table (``CONSOLE_COLUMNS``)."""
    full = dict(zip(STEP_COLUMNS, step_cells(report, step)))
    arm = report.arm(step.arm)
    m = arm.metrics if arm is not None else None
    load = step.server_load
    return [full["N"], full["kind"], correct_mark(step, 40), full["agg tok/s"], full["speedup"],
            full["paired speedup"], _ms(m.ttft_s if m else None, "p99"), _ms(m.itl_s if m else None, "p99"),
            "-" if load is None else str(load.running_max), full["waiting max (server gauge)"],
            full["wall s"]]


def load_sources(env: Envelope) -> list[str]:
    """Where the server-load columns came from (one entry per distinct source)."""
    return list(dict.fromkeys(s.server_load.source for s in env.steps if s.server_load))


def interval_text(found: SpeedupInterval | None) -> str:
    """``2.10x [1.92-2.30]``: a median speedup and its interval, or ``-``."""
    if found is None:
        return "-"
    return f"{found.median:.2f}x [{found.low:.2f}-{found.high:.2f}]"


PAIR_COLUMNS = ("when", "N", "pairs", "speedup [CI]", "1 alone tok/s", "N at once tok/s",
                "window", "machine cores busy", "wall s", "note")


def pair_cells(pairs: PairedThroughput) -> list[str]:
    """One row of the throughput pairs table (``PAIR_COLUMNS``): the medians of the counted
    samples' rates, the interval, the load."""
    counted = [p for p in pairs.pairs if p.counted]
    ones = sorted(p.one.tokens_per_s for p in counted if p.one.tokens_per_s is not None)
    manys = sorted(p.many.tokens_per_s for p in counted if p.many.tokens_per_s is not None)
    windows = sorted(p.many.window_s for p in counted)
    load = pairs.load
    engine = f"engine {load.engine:.2f}, " if load is not None and load.engine is not None else ""
    return [
        "start" if pairs.when == "start" else "after the waves",
        str(pairs.n),
        f"{len(counted)} of {len(pairs.pairs)}",
        interval_text(pairs.interval),
        _fmt(ones[len(ones) // 2] if ones else None, ".1f"),
        _fmt(manys[len(manys) // 2] if manys else None, ".1f"),
        f"{windows[len(windows) // 2]:.2f} s" if windows else "-",
        "-" if load is None else f"{load.busy:.2f} of {load.cores}: {engine}client "
        f"{load.client:.2f}, other {load.other:.2f}; steal {load.steal:.1%}",
        f"{pairs.wall_s:.1f}",
        pairs.note or "-",
    ]
