"""The verdict: parallel? correct? PASS / FAIL / INCONCLUSIVE, with reasons, from the findings.

``correct`` is False on any hard finding and never decided anywhere else; its reasons are the
findings' own lines, hard ones first, then every soft one, then what was not judged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from batchprobe.client.types import ErrorKind
from batchprobe.judge.judge import Judgement, judge
from batchprobe.judge.judged import Recall, judged_answers, recall
from batchprobe.judge.throughput import paired_parallel
from batchprobe.results.arms import ArmComparison, ArmMetrics, ArmResult
from batchprobe.results.findings import Finding, FindingKind, Judged
from batchprobe.results.models import Outcome, SessionResult, Status, Verdict
from batchprobe.results.sweep import Envelope, StopRule
from batchprobe.results.thresholds import Thresholds
from batchprobe.results.throughput import paired

# judged_answers is re-exported for probe.sweep; its one definition is judge.judged's.
__all__ = ["decide", "floor_recall", "reason_lines", "recall_floor"]

# Failures that mean no reply could be read as the API's at all (an HTML page, a proxy's error,
# the wrong path). A baseline with only these could not be probed. Replies that were read and
# went wrong (finish_reason "error", past max_tokens, cut off) and a server that went away are
# failures.
_UNREADABLE = frozenset({ErrorKind.MALFORMED_STREAM, ErrorKind.HTTP_STATUS})
_MAX_LINES = 6  # per arm and shape; the rest are counted


def _not_probed(m: ArmMetrics, status: Status) -> bool:
    """Every baseline session failed without a readable reply, and the server did not die."""
    unreadable = set(m.errors_by_kind) <= _UNREADABLE
    return bool(m.sessions) and not m.ok_sessions and unreadable and status is not Status.ENGINE_DIED


def _by_path(sessions: list[SessionResult]) -> list[Recall]:
    by_path: dict[str, list[SessionResult]] = {}
    for s in sessions:
        by_path.setdefault(s.situation.api if s.situation else "", []).append(s)
    return [r for group in by_path.values() if (r := recall(group)).answered]


def floor_recall(sessions: list[SessionResult]) -> float | None:
    """The recall the floor reads (``judged.recall``): the best over the request paths. A
    base model recalls over completions only; its chat items fail their own serial
    reference and are not judged, and must not make the completions items unjudged too."""
    return max((r.rate for r in _by_path(sessions) if r.rate is not None), default=None)


def _wilson_high(hits: int, n: int, z: float = 1.96) -> float:
    """The high end of the 95% Wilson interval of ``hits`` out of ``n``."""
    p, z2 = hits / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return centre + half


def recall_floor(
    base: ArmResult, t: Thresholds, envelope: Envelope | None = None
) -> Finding | None:
    """Recall not judged: the baseline found too few of its own needles alone (the model
    cannot do the task), an info finding on the baseline. A sweep's baseline sends its
    seeded sample and the references of wrong answers: the sample alone is no biased
    reading of what the model can do."""
    paths = _by_path(_sample(base, envelope)) if base.metrics else []
    found = max((r.rate for r in paths if r.rate is not None), default=None)
    if found is None or found >= t.recall_floor:
        return None
    # One miss in a sample of three is no evidence the model cannot do the task: the floor
    # holds only where even the high end of a path's interval stays under it.
    if any(_wilson_high(r.hits, r.answered) >= t.recall_floor for r in paths):
        return None
    return Finding(
        arm=base.spec.name, step=base.spec.depth, kind=FindingKind.NOT_JUDGED, severity="info",
        evidence=f"baseline recall {found:.0%}, floor {t.recall_floor:.0%}",
        message=f"recall not judged: the baseline arm {base.spec.name} found only {found:.0%} "
        f"of its needles (floor {t.recall_floor:.0%}); try a shorter --haystack-tokens or a "
        "model that can do the task",
    )


def reason_lines(findings: Sequence[Finding], prefix: str = "") -> list[str]:
    """One line per arm and shape: 'arm X, shape Y: line; line; and N more'."""
    groups: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for f in findings:
        groups[(f.arm, f.shape)].append(f.message)
    lines = []
    for (arm, shape), messages in groups.items():
        shown = messages[:_MAX_LINES]
        more = len(messages) - len(shown)
        where = f"arm {arm}" + (f", shape {shape}" if shape else "")
        lines.append(f"{prefix}{where}: " + "; ".join(shown) + (f"; and {more} more" if more else ""))
    return lines


@dataclass
class _Depth:
    """How deep a sweep judged, and whether its stop leaves deeper steps unjudged."""

    up_to: int | None
    inconclusive: bool
    why: str


def _depth(envelope: Envelope | None, planned: Sequence[int] | None) -> _Depth | None:
    if envelope is None or not planned or envelope.stop is None:
        return None
    stop = envelope.stop
    if stop.rule in (StopRule.PLAN_END, StopRule.INCORRECT, StopRule.ERRORS):
        return None
    up_to = envelope.largest_correct_n
    rule = stop.rule.value.replace("_", " ")
    where = f" at {stop.at_n}" if stop.at_n is not None else ""
    why = f"correct up to N={up_to}; stopped: {rule}{where}; not judged beyond it"
    # An SLO or the knee is the user's own limit; a time budget cuts the plan short.
    return _Depth(up_to, stop.rule in (StopRule.TIME_BUDGET, StopRule.STOPPED_EARLY), why)


def _correct_line(soft: Sequence[Finding], recall: bool) -> str:
    flips = [f for f in soft if f.kind is FindingKind.FLIP]
    kept = ", recall kept against the baseline" if recall else ""
    if flips:
        return (
            f"correct: no errors, no cross-talk; {len(flips)} wrong answer(s) did not come back "
            f"when replayed (numerics flips, soft, named below){kept}"
        )
    return f"correct: no errors, no cross-talk, every self-check held{kept}"


def _correctness(
    status: Status, findings: Sequence[Finding], judged: Sequence[Judged],
    floor: Finding | None, recall_kept: bool, depth: _Depth | None,
) -> tuple[bool | None, list[str]]:
    hard = [f for f in findings if f.hard]
    soft = [f for f in findings if f.severity == "soft"]
    if hard:
        return False, reason_lines(hard)
    if floor is not None:
        return None, [floor.message]
    if status is not Status.OK:
        return None, [f"run stopped early (status {status.value}): correctness not fully judged"]
    if not judged_answers(judged):
        return None, ["nothing was judged: no concurrent answer had a serial reference that passed"]
    line = _correct_line(soft, recall_kept)
    if depth is not None:
        return (None if depth.inconclusive else True), [f"{line}; {depth.why}"]
    return True, [line]


@dataclass(frozen=True)
class _Parallel:
    """Parallel or not, the line that says why, and the speedup it was judged on."""

    parallel: bool | None
    why: str
    speedup: float | None = None
    n: int | None = None
    low: float | None = None
    high: float | None = None


def _judged_parallel(speedup: float, n: int, figure: str, t: Thresholds) -> _Parallel:
    if speedup >= t.min_speedup:
        return _Parallel(True, f"parallel: {figure} (threshold {t.min_speedup:.2f}x)", speedup, n)
    return _Parallel(False, f"not parallel: {figure}, below the {t.min_speedup:.2f}x threshold",
                     speedup, n)


def _parallel_from_envelope(env: Envelope, t: Thresholds) -> _Parallel:
    """Judged on the throughput pairs' interval where they were taken; else (a verdict file
    from before them) on the best correct step deeper than the baseline; None when none ran."""
    pairs = paired(env.throughput, "start")
    if pairs is not None:
        p = paired_parallel(pairs, env, t)
        return _Parallel(p.parallel, p.why, p.speedup, p.n, p.low, p.high)
    correct = [s for s in env.steps if s.correct and s.n > 1 and s.speedup is not None]
    best = max(correct, key=lambda s: s.speedup or 0.0, default=None)
    if best is None or best.speedup is None:
        return _Parallel(None, "sweep: no correct step deeper than 1 had a speedup: "
                               "parallelism not judged")
    figure = (f"decode speedup {best.speedup:.2f}x at {best.n} in flight (the best correct "
              f"step) over {env.baseline}")
    return _judged_parallel(best.speedup, best.n, figure, t)


def _parallel(
    arms: Sequence[ArmResult], comparisons: Sequence[ArmComparison], t: Thresholds
) -> _Parallel:
    widest = max(arms[1:], key=lambda a: a.spec.concurrency, default=None)
    if widest is None or widest.spec.concurrency <= arms[0].spec.concurrency:
        return _Parallel(None, "no arm runs more sessions at once than the baseline: "
                               "parallelism not measured")
    if widest.state != "done":
        # A throughput figure from part of an arm says nothing about the whole.
        return _Parallel(None, f"arm {widest.spec.name} did not finish ({widest.state}): "
                               "parallelism not judged")
    comp = next(c for c in comparisons if c.arm == widest.spec.name)
    if comp.decode_speedup is None:
        return _Parallel(None, f"arm {widest.spec.name}: no decode throughput to compare (no "
                               "successful decode)")
    speedup, n = comp.decode_speedup, widest.spec.concurrency
    figure = f"decode speedup {speedup:.2f}x at {n} sessions over {comp.baseline}"
    return _judged_parallel(speedup, n, figure, t)


def decide(
    status: Status,
    arms: list[ArmResult],
    comparisons: list[ArmComparison],
    t: Thresholds,
    envelope: Envelope | None = None,
    planned: Sequence[int] | None = None,
    judgement: Judgement | None = None,
    replay: bool = False,
) -> Verdict:
    """The verdict from the findings (``judgement``; judged here when not given). A
    ``replay`` (a reproducer's case sent as an arm) is judged on correctness alone."""
    if judgement is None:
        judgement = judge(arms, comparisons, t)
    findings, judged = judgement.findings, judgement.judged
    done = [a for a in arms if a.metrics is not None]
    if not done or done[0] is not arms[0]:
        why = "the baseline arm did not complete" if arms else "no arm ran"
        hard = [f for f in findings if f.hard and f.kind is not FindingKind.NOT_RUN]
        if hard:
            # What failed before the baseline ran (a sweep's references come after it) still
            # fails the run: a failure needs no reference.
            return Verdict(outcome=Outcome.FAIL, correct=False,
                           reasons=[*reason_lines(hard), f"{why} (status {status.value})"])
        return Verdict(reasons=[f"{why} (status {status.value})"])
    baseline = done[0]
    m = baseline.metrics
    if m is not None and _not_probed(m, status):
        kinds = ", ".join(sorted(k.value for k in m.errors_by_kind))
        why = (
            f"the baseline arm {baseline.spec.name} got no answer from the server "
            f"({m.sessions}/{m.sessions} sessions errored: {kinds}): nothing to compare; "
            "check --base-url and the server's API"
        )
        return Verdict(reasons=[why])
    depth = _depth(envelope, planned)
    floor = _floor(judgement, baseline, t, envelope)
    kept = floor is None and recall(_sample(baseline, envelope)).answered > 0
    correct, reasons = _correctness(status, findings, judged, floor, kept, depth)
    reasons += reason_lines([f for f in findings if f.severity == "soft"], "soft: ")
    reasons += reason_lines([f for f in findings if f.severity == "info" and f is not floor],
                            "not judged: ")
    if replay:
        p = _Parallel(None, "a reproducer's case, replayed (--replay): judged on correctness "
                            "alone, parallelism not measured")
    elif envelope is not None:
        p = _parallel_from_envelope(envelope, t)
    else:
        p = _parallel(done, comparisons, t)
    reasons.append(p.why)
    if correct is False or p.parallel is False:
        outcome = Outcome.FAIL
    elif correct and (p.parallel or replay):
        outcome = Outcome.PASS
    else:
        outcome = Outcome.INCONCLUSIVE
    return Verdict(
        outcome=outcome,
        parallel=p.parallel,
        correct=correct,
        correct_up_to_n=depth.up_to if depth is not None else None,
        judged_answers=judged_answers(judged),
        parallel_reason=p.why,
        speedup=p.speedup,
        speedup_n=p.n,
        speedup_low=p.low,
        speedup_high=p.high,
        reasons=reasons,
    )


def _sample(base: ArmResult, envelope: Envelope | None) -> list[SessionResult]:
    sample = set(envelope.reference_sample) if envelope is not None else set()
    return [s for s in base.sessions if s.session in sample] if sample else base.sessions


def _floor(
    judgement: Judgement, base: ArmResult, t: Thresholds, envelope: Envelope | None
) -> Finding | None:
    """The recall floor's finding, in the judgement's findings (added there when the caller
    has not: the report's findings are the judgement's)."""
    mine = recall_floor(base, t, envelope)
    if mine is None:
        return None
    found = next((f for f in judgement.findings if f == mine), None)
    if found is None:
        judgement.findings.append(mine)
        found = mine
    return found
