"""`batchprobe compare`: runs of one plan side by side, and the regression gate.

The first run is the reference. A regression is a check (``results.checks``, rendered from the
findings) that fails in another run and did not in the reference, a planned arm that did not
run, a sweep that is now correct to a shallower depth, or a decode throughput drop beyond
``max_throughput_drop``. A PASS that became a FAIL is always one: the run's own outcome and
correctness are checks. Runs of different plans are not comparable.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.errors import NotComparable
from batchprobe.judge.checks import CheckStatus, run_checks
from batchprobe.report._compare_sweep import Curve, Row, curves, envelope_rows, per_n_rows
from batchprobe.results.models import ArmMetrics, Report

DEFAULT_MAX_THROUGHPUT_DROP = 0.10
# RunConfig fields that may differ between comparable runs: what is being compared (engine,
# model, patches) and how it was judged or waited for. Every other field shapes the items or
# the arms, so it must match; a field added to RunConfig later counts as shaping by default.
MAY_DIFFER = frozenset(
    {"base_url", "engine", "model", "patches", "thresholds", "request_timeout_s", "logprobs"}
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunRef(_Model):
    path: str
    label: str = Field(description="--label, or the verdict file's stem")
    run_id: str


class TextRow(_Model):
    label: str
    values: list[str]

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


class FigureRow(_Model):
    """One headline figure across the runs, with the change against the first."""

    label: str
    values: list[float | None]
    spec: str = Field(description="format spec of a value, e.g. '.1f'")
    unit: str = ""
    percent: bool = False

    def cell(self, i: int) -> str:
        value = self.values[i]
        if value is None:
            return "-"
        return f"{value:.0%}" if self.percent else f"{value:{self.spec}}{self.unit}"

    def delta(self, i: int) -> str | None:
        """The change against the first run, as text; None for the first run or without data."""
        first, value = self.values[0], self.values[i]
        if i == 0 or first is None or value is None:
            return None
        if self.percent:
            return f"{(value - first) * 100:+.0f} pt"
        if first == 0:
            return None if value == 0 else f"{value - first:+{self.spec}}"
        return f"{(value - first) / first:+.0%}"


class Finding(_Model):
    run: str = Field(description="label of the run it is about")
    check: str
    message: str


class RunsComparison(_Model):
    runs: list[RunRef]
    facts: list[TextRow]
    figures: list[FigureRow]
    regressions: list[Finding] = Field(default_factory=list)
    improvements: list[Finding] = Field(default_factory=list)
    max_throughput_drop: float
    envelope: list[TextRow] = Field(default_factory=list, description="Sweeps: the envelopes.")
    per_n: list[TextRow] = Field(default_factory=list, description="Sweeps: one row per N.")
    curves: list[Curve] = Field(default_factory=list, description="Sweeps: tok/s by N per run.")


def check_comparable(reports: list[Report], paths: list[Path]) -> None:
    """:class:`NotComparable` naming every plan field that differs from the first run."""
    first = reports[0].config.model_dump(mode="json", exclude=set(MAY_DIFFER))
    differ: list[str] = []
    fields: set[str] = set()
    for report, path in zip(reports[1:], paths[1:]):
        other = report.config.model_dump(mode="json", exclude=set(MAY_DIFFER))
        for key in sorted(first.keys() | other.keys()):
            if first.get(key) != other.get(key):
                fields.add(f"config.{key}")
                differ.append(f"config.{key} ({first.get(key)!r} in {paths[0]}, "
                              f"{other.get(key)!r} in {path})")
    if differ:
        raise NotComparable(
            "the runs are not comparable (different items or arms): " + "; ".join(differ),
            fields=sorted(fields),
        )


def _facts(reports: list[Report]) -> list[TextRow]:
    getters: list[tuple[str, Callable[[Report], object]]] = [
        ("outcome", lambda r: r.verdict.outcome.value),
        ("parallel speedup [CI]", _paired_figure),
        ("status", lambda r: r.status.value),
        ("engine", lambda r: r.config.engine or r.config.base_url),
        ("engine version", lambda r: r.environment.engine_version),
        ("model", lambda r: r.config.model or r.environment.served_model),
        ("patches", lambda r: ", ".join(r.patches_applied) or "none"),
        ("batchprobe", lambda r: r.environment.batchprobe_version),
        ("platform", lambda r: r.environment.platform),
        ("sessions", lambda r: r.config.sessions),
        ("workloads", lambda r: ", ".join(r.config.workloads)),
        ("arms", lambda r: ", ".join(a.name for a in r.config.arms)),
        ("thresholds", lambda r: (f"speedup >= {r.config.thresholds.min_speedup:g}x, "
                                  "strict greedy "
                                  f"{'on' if r.config.thresholds.strict_greedy else 'off'}")),
    ]
    return [TextRow(label=label, values=[str(get(r) or "-") for r in reports])
            for label, get in getters]


def _paired_figure(report: Report) -> str | None:
    """The verdict's speedup with its interval (a sweep's throughput pairs), or its figure."""
    v = report.verdict
    if v.speedup is None:
        return None
    if v.speedup_low is None or v.speedup_high is None:
        return f"{v.speedup:.2f}x at N={v.speedup_n}"
    return f"{v.speedup:.2f}x [{v.speedup_low:.2f}-{v.speedup_high:.2f}] at N={v.speedup_n}"


def _pairs_findings(ref: Report, other: Report, label: str) -> list[Finding]:
    """A paired speedup whose whole interval lies below the reference's: overlapping
    intervals are noise, not a regression."""
    a, b = ref.verdict, other.verdict
    if a.speedup_low is None or b.speedup_high is None or a.speedup_n != b.speedup_n:
        return []
    if b.speedup_high >= a.speedup_low:
        return []
    return [Finding(
        run=label, check="run.speedup",
        message=f"paired speedup at N={a.speedup_n}: {a.speedup:.2f}x "
                f"[{a.speedup_low:.2f}-{a.speedup_high:.2f}] -> {b.speedup:.2f}x "
                f"[{b.speedup_low:.2f}-{b.speedup_high:.2f}] (the intervals do not overlap)",
    )]


def _metrics(report: Report, arm: str) -> ArmMetrics | None:
    found = report.arm(arm)
    return found.metrics if found else None


_ARM_FIGURES: list[tuple[str, str, str, bool, Callable[[ArmMetrics], float | None]]] = [
    ("decode tok/s", ".1f", "", False, lambda m: m.decode_tokens_per_s),
    ("prefill tok/s", ".0f", "", False, lambda m: m.prefill_tokens_per_s),
    ("recall", "", "", True, lambda m: m.recall),
    ("errors", ".0f", "", False, lambda m: m.sessions - m.ok_sessions),
    ("cross-talk sessions", ".0f", "", False, lambda m: m.cross_talk_sessions),
    ("TTFT p50", ".0f", " ms", False, lambda m: m.ttft_s.p50 * 1000 if m.ttft_s else None),
    ("TTFT p99", ".0f", " ms", False, lambda m: m.ttft_s.p99 * 1000 if m.ttft_s else None),
    ("ITL p50", ".1f", " ms", False, lambda m: m.itl_s.p50 * 1000 if m.itl_s else None),
]


def _figures(reports: list[Report]) -> list[FigureRow]:
    rows: list[FigureRow] = []
    for spec in reports[0].config.arms:
        for label, fmt, unit, percent, get in _ARM_FIGURES:
            values: list[float | None] = []
            for r in reports:
                m = _metrics(r, spec.name)
                values.append(None if m is None else get(m))
            rows.append(FigureRow(label=f"{spec.name} {label}", values=values, spec=fmt,
                                  unit=unit, percent=percent))
        comps = [r.comparison(spec.name) for r in reports]
        if any(c is not None for c in comps):
            rows.append(FigureRow(label=f"{spec.name} decode speedup", spec=".2f", unit="x",
                                  values=[c.decode_speedup if c else None for c in comps]))
            rows.append(FigureRow(label=f"{spec.name} greedy equal", spec="", percent=True,
                                  values=[c.greedy_match_rate if c else None for c in comps]))
    return rows


def _arm_findings(ref: Report, other: Report, label: str, drop: float) -> list[Finding]:
    found: list[Finding] = []
    for arm in ref.arms:
        a, b = arm.metrics, _metrics(other, arm.spec.name)
        if a is None or not a.decode_tokens_per_s or arm.spec.role != "arm":
            continue
        name = arm.spec.name
        after = b.decode_tokens_per_s if b else None
        if after is None:
            found.append(Finding(run=label, check=f"{name}.throughput",
                                 message=f"arm {name}: no decode throughput (was "
                                         f"{a.decode_tokens_per_s:.1f} tok/s)"))
        elif after < a.decode_tokens_per_s * (1 - drop):
            found.append(Finding(
                run=label, check=f"{name}.throughput",
                message=f"arm {name}: decode throughput {a.decode_tokens_per_s:.1f} -> "
                        f"{after:.1f} tok/s ({after / a.decode_tokens_per_s - 1:+.0%}, "
                        f"tolerated -{drop:.0%})"))
    return found


def _envelope_findings(ref: Report, other: Report, label: str) -> list[Finding]:
    """A sweep correct to a shallower depth than the reference's, in one line."""
    a, b = ref.envelope, other.envelope
    if a is None or b is None:
        return []
    was = a.largest_correct_n or 0
    now = b.largest_correct_n or 0
    if now >= was and (b.first_failing_n is None or a.first_failing_n is not None):
        return []
    fails = f"now fails at N={b.first_failing_n}" if b.first_failing_n else f"now correct to N={now}"
    before = (f"was correct to N={was}" if a.first_failing_n is None
              else f"was correct to N={was}, failing at N={a.first_failing_n}")
    return [Finding(run=label, check="run.envelope", message=f"{fails}; {before}")]


def _check_findings(ref: Report, other: Report, label: str) -> tuple[list[Finding], list[Finding]]:
    before = {c.name: c for c in run_checks(ref)}
    after = {c.name: c for c in run_checks(other)}
    planned = {a.name for a in ref.config.arms}
    ran = {c.group for c in after.values() if c.kind == "completed" and c.status is CheckStatus.PASSED}
    regressed, fixed = [], []
    for name, now in after.items():
        check = before.get(name)
        if now.status is CheckStatus.FAILED and (check is None or check.status is not CheckStatus.FAILED):
            regressed.append(Finding(run=label, check=name, message=f"{name} failed: {now.message}"))
        elif check is not None and check.status is CheckStatus.FAILED and now.status is CheckStatus.PASSED:
            fixed.append(Finding(run=label, check=name, message=f"{name} passes: {now.message}"))
    for name, check in before.items():
        gone = check.kind == "completed" and check.status is CheckStatus.PASSED
        if gone and check.group in planned and check.group not in ran and name not in after:
            regressed.append(Finding(run=label, check=name, message=f"arm {check.group} did not run"))
    return regressed, fixed


def _rows(rows: list[Row]) -> list[TextRow]:
    return [TextRow(label=label, values=values) for label, values in rows]


def run_labels(paths: list[Path], given: list[str] | None = None) -> list[str]:
    """Each run's column label: the one given (``--label``), else its file's stem (two runs
    against one URL still get two names), made unique with the run's position."""
    labels = [given[i] if given and i < len(given) else p.stem for i, p in enumerate(paths)]
    return [lbl if labels.count(lbl) == 1 else f"{lbl} ({i + 1})" for i, lbl in enumerate(labels)]


def compare_reports(
    reports: list[Report], paths: list[Path],
    max_throughput_drop: float = DEFAULT_MAX_THROUGHPUT_DROP,
    labels: list[str] | None = None,
) -> RunsComparison:
    """Compare every run with the first; :class:`NotComparable` when the plans differ."""
    check_comparable(reports, paths)
    labels = run_labels(paths, labels)
    comp = RunsComparison(
        runs=[RunRef(path=str(p), label=lbl, run_id=r.run_id)
              for r, p, lbl in zip(reports, paths, labels)],
        facts=_facts(reports),
        figures=_figures(reports),
        max_throughput_drop=max_throughput_drop,
        envelope=_rows(envelope_rows(reports)),
        per_n=_rows(per_n_rows(reports)),
        curves=curves(reports, labels),
    )
    for other, label in zip(reports[1:], labels[1:]):
        regressed, fixed = _check_findings(reports[0], other, label)
        envelope = _envelope_findings(reports[0], other, label)
        if envelope:
            # Said once, as the envelope's change, not again as the envelope check.
            regressed = [f for f in regressed if f.check != "run.envelope"]
        figures = _arm_findings(reports[0], other, label, max_throughput_drop)
        paired = _pairs_findings(reports[0], other, label)
        if paired:
            # A parallel "yes" that became "no" is this change of interval: said once.
            regressed = [f for f in regressed if f.check != "run.parallel"]
        figures += paired
        comp.regressions += envelope + regressed + figures
        comp.improvements += fixed
    return comp

