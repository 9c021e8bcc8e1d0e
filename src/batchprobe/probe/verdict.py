"""The verdict: parallel? correct? PASS / FAIL / INCONCLUSIVE, with reasons."""

from __future__ import annotations

from batchprobe.client.types import ErrorKind
from batchprobe.probe.judge import shape_failures, unjudged
from batchprobe.probe.metrics import floor_recall
from batchprobe.results.models import (
    ArmComparison,
    ArmMetrics,
    ArmResult,
    Outcome,
    Status,
    Verdict,
)
from batchprobe.results.sweep import Envelope
from batchprobe.results.thresholds import Thresholds

# Failures that mean no reply could be read as the API's at all (an HTML page, a proxy's error,
# the wrong path). A baseline with only these could not be probed. Replies that were read and
# went wrong (finish_reason "error", past max_tokens, cut off) and a server that went away are
# failures.
_UNREADABLE = frozenset({ErrorKind.MALFORMED_STREAM, ErrorKind.HTTP_STATUS})


def _not_probed(m: ArmMetrics, status: Status) -> bool:
    """Every baseline session failed without a readable reply, and the server did not die."""
    unreadable = set(m.errors_by_kind) <= _UNREADABLE
    return bool(m.sessions) and not m.ok_sessions and unreadable and status is not Status.ENGINE_DIED


def _errors(arm: ArmResult) -> list[str]:
    m = arm.metrics
    if m is None or not m.errors_by_kind:
        return []
    kinds = ", ".join(f"{kind.value} x{count}" for kind, count in sorted(m.errors_by_kind.items()))
    failed = m.sessions - m.ok_sessions
    return [f"arm {arm.spec.name}: {failed}/{m.sessions} sessions errored ({kinds})"]


def _correctness(
    arms: list[ArmResult], comparisons: list[ArmComparison], t: Thresholds, recall_ok: bool
) -> list[str]:
    failures: list[str] = []
    for arm in arms:
        if arm.error is not None:
            failures.append(f"arm {arm.spec.name}: {arm.error}")
        failures += _errors(arm)
        if arm.server_alive_after is False:
            failures.append(f"arm {arm.spec.name}: the server stopped answering after this arm")
    # Recall misses count only where the baseline found the needle (so also when it is weak).
    failures += shape_failures(arms, t)
    for c in comparisons:
        if t.strict_greedy and c.greedy_compared and c.greedy_matches < c.greedy_compared:
            failures.append(
                f"arm {c.arm}: {c.greedy_compared - c.greedy_matches}/{c.greedy_compared} greedy "
                f"outputs differ from {c.baseline} (strict greedy)"
            )
    return failures


def arm_failures(arms: list[ArmResult], arm: ArmResult, t: Thresholds) -> list[str]:
    """The correctness failures of ``arm`` (a sweep step, one of ``arms``), judged against
    the references among ``arms`` (the first one and any serial reference pass)."""
    prefix = f"arm {arm.spec.name}"
    lines = _correctness(arms, [], t, recall_ok=True)
    return [line for line in lines if line.startswith((prefix + ":", prefix + ","))]


def _parallel_from_envelope(env: Envelope, t: Thresholds) -> tuple[bool | None, str]:
    fastest = max(
        (s for s in env.steps if s.speedup is not None), key=lambda s: s.speedup or 0.0, default=None
    )
    step = env.step(env.knee_n) if env.knee_n is not None else fastest
    if step is None or step.speedup is None:
        return None, "sweep: no step had a speedup to compare: parallelism not measured"
    at = step.n
    where = "the knee" if at == env.knee_n else "the fastest step"
    figure = f"decode speedup {step.speedup:.2f}x at {at} in flight ({where}) over {env.baseline}"
    if step.speedup >= t.min_speedup:
        return True, f"parallel: {figure} (threshold {t.min_speedup:.2f}x)"
    return False, f"not parallel: {figure}, below the {t.min_speedup:.2f}x threshold"


def _parallel(
    arms: list[ArmResult], comparisons: list[ArmComparison], t: Thresholds
) -> tuple[bool | None, str]:
    widest = max(arms[1:], key=lambda a: a.spec.concurrency, default=None)
    if widest is None or widest.spec.concurrency <= arms[0].spec.concurrency:
        return None, "no arm runs more sessions at once than the baseline: parallelism not measured"
    if widest.state != "done":
        # A throughput figure from part of an arm says nothing about the whole.
        return None, f"arm {widest.spec.name} did not finish ({widest.state}): parallelism not judged"
    comp = next(c for c in comparisons if c.arm == widest.spec.name)
    if comp.decode_speedup is None:
        return None, f"arm {widest.spec.name}: no decode throughput to compare (no successful decode)"
    speedup, n = comp.decode_speedup, widest.spec.concurrency
    figure = f"decode speedup {speedup:.2f}x at {n} sessions over {comp.baseline}"
    if speedup >= t.min_speedup:
        return True, f"parallel: {figure} (threshold {t.min_speedup:.2f}x)"
    return False, f"not parallel: {figure}, below the {t.min_speedup:.2f}x threshold"


def decide(
    status: Status,
    arms: list[ArmResult],
    comparisons: list[ArmComparison],
    t: Thresholds,
    envelope: Envelope | None = None,
) -> Verdict:
    done = [a for a in arms if a.metrics is not None]
    if not done or done[0] is not arms[0]:
        why = "the baseline arm did not complete" if arms else "no arm ran"
        return Verdict(reasons=[f"{why} (status {status.value})"])
    baseline = done[0]
    m = baseline.metrics
    if m is not None and _not_probed(m, status):
        # Nothing the server said could be read as an answer: a server that could not be
        # probed, not a batching failure.
        kinds = ", ".join(sorted(k.value for k in m.errors_by_kind))
        why = (
            f"the baseline arm {baseline.spec.name} got no answer from the server "
            f"({m.sessions}/{m.sessions} sessions errored: {kinds}): nothing to compare; "
            "check --base-url and the server's API"
        )
        return Verdict(reasons=[why])
    base_recall = floor_recall(baseline.sessions) if baseline.metrics else None
    recall_ok = base_recall is None or base_recall >= t.recall_floor
    reasons: list[str] = []
    failures = _correctness(done, comparisons, t, recall_ok)
    if failures:
        correct: bool | None = False
        reasons += failures
    elif not recall_ok:
        correct = None
        reasons.append(
            f"recall not judged: the baseline arm {baseline.spec.name} found only "
            f"{base_recall:.0%} of its needles (floor {t.recall_floor:.0%}); "
            "try a shorter --haystack-tokens or a model that can do the task"
        )
    elif status is not Status.OK:
        correct = None
        reasons.append(f"run stopped early (status {status.value}): correctness not fully judged")
    else:
        correct = True
        kept = ", recall kept against the baseline" if base_recall is not None else ""
        reasons.append(f"correct: no errors, no cross-talk, every self-check held{kept}")
    note = unjudged(done)
    if note:
        reasons.append(note)
    if envelope is not None:
        parallel, why = _parallel_from_envelope(envelope, t)
    else:
        parallel, why = _parallel(done, comparisons, t)
    reasons.append(why)
    if correct is False or parallel is False:
        outcome = Outcome.FAIL
    elif correct and parallel:
        outcome = Outcome.PASS
    else:
        outcome = Outcome.INCONCLUSIVE
    return Verdict(outcome=outcome, parallel=parallel, correct=correct, reasons=reasons)
