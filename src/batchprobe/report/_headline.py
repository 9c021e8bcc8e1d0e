"""The answer first, in plain words, shared by the HTML, markdown and console renderers.

``answer`` is the two sentences a reader asks for ("Parallel: yes, 8.7× at N=16. Correct: up
to N=5; first wrong at N=6 (pinned by bisection)."), ``cards`` the envelope facts that say
something (no "none" cards), and ``failing_lines`` one line per failing step and shape, in
order of N, from ``report.findings``. Every value is a field of the typed report; the verdict,
the envelope and the findings are rendered, never re-judged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from batchprobe.report._envelope import Fact
from batchprobe.results.findings import Finding, FindingKind
from batchprobe.results.models import Report, Status
from batchprobe.results.sweep import Envelope, StopRule
from batchprobe.results.throughput import paired


def _speedup(report: Report) -> tuple[float, int] | None:
    """The speedup the verdict judged parallelism on, and its N (the verdict's own figure)."""
    v = report.verdict
    return (v.speedup, v.speedup_n) if v.speedup is not None and v.speedup_n is not None else None


def speedup_text(report: Report) -> str:
    """``2.1× (CI 1.9-2.3×) at N=16``: the verdict's figure with its interval, where it has one."""
    best, v = _speedup(report), report.verdict
    if best is None:
        return ""
    interval = (f" (CI {v.speedup_low:.1f}-{v.speedup_high:.1f}×)"
                if v.speedup_low is not None and v.speedup_high is not None else "")
    return f"{best[0]:.1f}×{interval} at N={best[1]}"


def parallel_sentence(report: Report) -> str:
    at = speedup_text(report)
    parallel = report.verdict.parallel
    if parallel is True:
        return f"Parallel: yes, {at}." if at else "Parallel: yes."
    if parallel is False:
        return f"Parallel: no, {at} at best." if at else "Parallel: no."
    if at and report.verdict.speedup_low is not None:
        threshold = report.config.thresholds.min_speedup
        return f"Parallel: not decided, {at} holds the {threshold:.1f}× threshold."
    return "Parallel: not judged."


def history_sentence(report: Report) -> str:
    """The server's history, when the judge found throughput dropped after the mixed waves:
    ``Slower after its own traffic: 2.2× → 1.1× at N=16.``"""
    dropped = [f for f in report.findings if f.kind is FindingKind.THROUGHPUT_DROP]
    env = report.envelope
    if not dropped or env is None:
        return ""
    start, after = paired(env.throughput, "start"), paired(env.throughput, "after")
    if start is None or after is None or start.interval is None or after.interval is None:
        return ""
    return (f"Slower after its own traffic: {start.interval.median:.1f}× → "
            f"{after.interval.median:.1f}× at N={start.n}.")


def correct_sentence(report: Report) -> str:
    env, correct = report.envelope, report.verdict.correct
    if env is not None and env.steps:
        if env.first_failing_n is not None:
            how = " (pinned by bisection)" if env.threshold_pinned else ""
            upto = (f"up to N={env.largest_correct_n}; " if env.largest_correct_n is not None
                    else "no; ")
            return f"Correct: {upto}first wrong at N={env.first_failing_n}{how}."
        if env.largest_correct_n is not None and correct is not False:
            return f"Correct: yes, at every N up to {env.largest_correct_n}."
    if correct is True:
        return "Correct: yes."
    if correct is False:
        arms = list(dict.fromkeys(f.arm for f in report.findings if f.hard))
        where = f" (wrong in {', '.join(arms)})" if arms else ""
        return f"Correct: no{where}."
    status = "" if report.status is Status.OK else f" (run {report.status.value})"
    return f"Correct: not judged{status}."


def answer(report: Report) -> str:
    """``Parallel: yes, 8.7× at N=16. Correct: up to N=5; first wrong at N=6 (pinned ...).``"""
    history = history_sentence(report)
    return f"{parallel_sentence(report)} {correct_sentence(report)}" + (
        f" {history}" if history else "")


def scaling_fact(env: Envelope) -> Fact | None:
    """The knee, or, with none found, whether throughput still climbs at the deepest step."""
    if env.knee_n is not None:
        return Fact("knee", f"N={env.knee_n}")
    rated = [s for s in sorted(env.steps, key=lambda s: s.n) if s.decode_tokens_per_s]
    if len(rated) < 2:
        return None
    last, before = rated[-1], rated[-2]
    gain = (last.decode_tokens_per_s or 0) / (before.decode_tokens_per_s or 1) - 1
    if gain <= 0:
        return None
    return Fact("scaling", f"still scaling at N={last.n} ({gain:+.0%} over N={before.n})")


def _stopped(env: Envelope) -> Fact | None:
    """Why the sweep stopped, quoting the evidence of the depth it names (not a deeper one)."""
    stop = env.stop
    if stop is None or stop.rule is StopRule.PLAN_END:
        return None
    if stop.rule is StopRule.INCORRECT and env.first_failing_n is not None:
        step = env.step(env.first_failing_n)
        detail = step.reasons[0] if step is not None and step.reasons else ""
        return Fact("stopped", f"wrong answers at N={env.first_failing_n}", detail)
    at = f" at N={stop.at_n}" if stop.at_n is not None else ""
    return Fact("stopped", f"{stop.rule.value}{at}", stop.detail)


def cards(report: Report) -> list[Fact]:
    """The envelope's facts that say something, in the order a reader asks."""
    env = report.envelope
    if env is None:
        return []
    best = _speedup(report)
    found: list[Fact | None] = [
        Fact("speedup", speedup_text(report)) if best else None,
        Fact("largest correct N", str(env.largest_correct_n))
        if env.largest_correct_n is not None else None,
        Fact("first failing N", f"{env.first_failing_n}"
             + (" (pinned)" if env.threshold_pinned else ""))
        if env.first_failing_n is not None else None,
        Fact("peak throughput", f"{env.peak_decode_tokens_per_s:.1f} tok/s at N={env.peak_n}")
        if env.peak_decode_tokens_per_s is not None else None,
        scaling_fact(env),
        Fact("largest N within SLO", str(env.largest_within_slo_n))
        if env.largest_within_slo_n is not None and _slo_given(report) else None,
        Fact("engine cap", f"{env.engine_cap} running at once (server gauge)")
        if env.engine_cap is not None else None,
        Fact("serial baseline", f"{env.baseline_decode_tokens_per_s:.1f} tok/s")
        if env.baseline_decode_tokens_per_s is not None else None,
        _stopped(env),
    ]
    return [f for f in found if f is not None]


def _slo_given(report: Report) -> bool:
    return report.config.slo_ttft_p99_s is not None or report.config.slo_itl_p99_s is not None


@dataclass(frozen=True)
class FailingLine:
    """One failing step (or arm) and shape: its findings, summed up in one line."""

    n: int | None
    arm: str
    shape: str | None
    findings: list[Finding]

    @property
    def sessions(self) -> int:
        return len({s for f in self.findings for s in f.sessions})

    @property
    def text(self) -> str:
        where = f"N={self.n}" if self.n is not None else self.arm
        kinds = Counter(f.kind.value.replace("_", " ") for f in self.findings)
        what = ", ".join(f"{k} ×{c}" if c > 1 else k for k, c in kinds.most_common())
        sessions = f"{self.sessions} session{'s' if self.sessions != 1 else ''}: " if (
            self.sessions) else ""
        return f"{where} · {self.shape or 'the arm'} · {sessions}{what}"


def _n_of(report: Report, finding: Finding) -> int | None:
    if finding.step is not None:
        return finding.step
    arm = report.arm(finding.arm)
    return arm.spec.concurrency if arm is not None else None


def failing_lines(report: Report, severity: str = "hard") -> list[FailingLine]:
    """One line per failing step (or arm) and shape, ordered by N."""
    groups: dict[tuple[str, str | None], list[Finding]] = {}
    for f in report.findings:
        if f.severity == severity:
            groups.setdefault((f.arm, f.shape), []).append(f)
    lines = [FailingLine(_n_of(report, fs[0]), arm, shape, fs)
             for (arm, shape), fs in groups.items()]
    return sorted(lines, key=lambda line: (line.n if line.n is not None else 0, line.arm,
                                           line.shape or ""))
