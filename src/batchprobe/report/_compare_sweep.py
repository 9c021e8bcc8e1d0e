"""What `compare` shows of sweeps: the envelope side by side, one row per N over the union of
the runs' depths, and each run's throughput curve for the overlay figure.

Every value is a field of a run's envelope; the regression list is compare's own.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.report._headline import scaling_fact
from batchprobe.results.models import Report
from batchprobe.results.sweep import Envelope


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CurvePoint(_Model):
    n: int
    tokens_per_s: float | None
    correct: bool | None
    bisect: bool = False


class Curve(_Model):
    """One run's sweep: its steps' throughput by N, and where it went wrong."""

    label: str
    points: list[CurvePoint] = Field(default_factory=list)
    first_failing_n: int | None = None
    largest_correct_n: int | None = None


Row = tuple[str, list[str]]  # a label and one cell per run (compare makes its TextRow of it)


def _envelope(report: Report) -> Envelope | None:
    env = report.envelope
    return env if env is not None and env.steps else None


def _n(value: int | None, none: str = "none") -> str:
    return none if value is None else str(value)


def _first_failing(env: Envelope) -> str:
    if env.first_failing_n is None:
        return f"none up to N={max(s.n for s in env.steps)}"
    return f"{env.first_failing_n}{' (pinned)' if env.threshold_pinned else ''}"


def _knee(env: Envelope) -> str:
    found = scaling_fact(env)
    return found.value if found is not None else "none found"


def envelope_rows(reports: list[Report]) -> list[Row]:
    """Largest correct N, first failing N, peak tok/s and its N, knee, largest N within SLO."""
    envs = [_envelope(r) for r in reports]
    if not any(envs):
        return []

    def row(label: str, cell: Callable[[Envelope], str]) -> Row:
        return label, [cell(e) if e is not None else "no sweep" for e in envs]

    return [
        row("largest correct N", lambda e: _n(e.largest_correct_n)),
        row("first failing N", _first_failing),
        row("peak tok/s (its N)", lambda e: "-" if e.peak_decode_tokens_per_s is None
            else f"{e.peak_decode_tokens_per_s:.1f} (N={e.peak_n})"),
        row("knee", _knee),
        row("largest N within SLO", lambda e: _n(e.largest_within_slo_n, "-")),
    ]


def per_n_rows(reports: list[Report]) -> list[Row]:
    """For each N any run swept: each run's aggregate tok/s there and its ✓/✗."""
    envs = [_envelope(r) for r in reports]
    depths = sorted({s.n for e in envs if e is not None for s in e.steps})
    rows = []
    for n in depths:
        cells = []
        for env in envs:
            step = env.step(n) if env is not None else None
            if step is None:
                cells.append("not run")
                continue
            mark = {True: "✓", False: "✗", None: "-"}[step.correct]
            rate = "-" if step.decode_tokens_per_s is None else f"{step.decode_tokens_per_s:.1f}"
            cells.append(f"{mark} {rate} tok/s" + (" (bisect)" if step.kind == "bisect" else ""))
        rows.append((f"N={n}", cells))
    return rows


def curves(reports: list[Report], labels: list[str]) -> list[Curve]:
    found = []
    for report, label in zip(reports, labels):
        env = _envelope(report)
        if env is None:
            continue
        points = [CurvePoint(n=s.n, tokens_per_s=s.decode_tokens_per_s, correct=s.correct,
                             bisect=s.kind == "bisect")
                  for s in sorted(env.steps, key=lambda s: s.n)]
        found.append(Curve(label=label, points=points, first_failing_n=env.first_failing_n,
                           largest_correct_n=env.largest_correct_n))
    return found
