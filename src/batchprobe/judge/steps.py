"""A step's record and correctness, the stop rule's reading of a step, the knee and the
envelope: pure functions of what the steps measured and the run's findings (the final pass
makes every step's record from them; the sweep reads them as it runs)."""

from __future__ import annotations

from collections.abc import Sequence

from batchprobe.client._lag import worst
from batchprobe.judge.judged import judged_answers
from batchprobe.judge.verdict import reason_lines
from batchprobe.results.findings import Finding, FindingKind, Judged
from batchprobe.results.models import ArmComparison, ArmResult, RunConfig, SessionResult
from batchprobe.results.sweep import Envelope, ServerLoad, StopRule, SweepStep
from batchprobe.results.throughput import PairedThroughput, paired

# Throughput growth under this fraction over the step before, twice in a row, is the knee.
KNEE_GROWTH = 0.10


def client_limit(arm: ArmResult) -> str | None:
    """Why the arm's latency figures are the client's rather than the server's, or None."""
    health = arm.client
    if health is None or health.trusted:
        return None
    lagged = worst(health.loop_lag)
    busy = lagged.busy_p99_ms if lagged is not None else float("nan")
    return (
        f"arm {arm.spec.name}: the client's event loop lagged (busy p99 {busy:.1f} ms over the "
        f"{health.lag_threshold_ms:g} ms threshold, {health.procs} client process(es)): its TTFT "
        "and ITL include the client's own queueing, not only the server's; rerun with more "
        "--client-procs"
    )


def decode_window(s: SessionResult) -> tuple[float, float] | None:
    """When ``s`` decoded: first to last token (start to end for a buffered stream)."""
    if s.buffered:
        return (s.start_s, s.end_s)
    if s.first_token_s is None or s.last_token_s is None:
        return None
    return (s.first_token_s, s.last_token_s)


def most_at_once(sessions: list[SessionResult]) -> int:
    """The most sessions decoding at the same moment, from their decode windows."""
    edges = sorted(
        (t, step)
        for s in sessions
        if (w := decode_window(s)) is not None and w[1] > w[0]
        for t, step in ((w[0], 1), (w[1], -1))
    )
    most = current = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        current += step
        most = max(most, current)
    return most


def serial_s(sessions: Sequence[SessionResult], references: Sequence[ArmResult]) -> float | None:
    """How long ``sessions`` took sent one at a time: each one's serial reference's end-to-end
    time (a copy counts its item again), scaled up for sessions without one."""
    alone = {s.session: s.e2e_s for ref in references for s in ref.sessions if s.ok}
    covered = [alone[s.session] for s in sessions if s.session in alone]
    if not covered:
        return None
    return sum(covered) * len(sessions) / len(covered)


def step_record(
    arm: ArmResult,
    comparison: ArmComparison | None,
    mixed_speedup: float | None,
    judgement: tuple[list[Finding], list[Judged]],
    config: RunConfig,
    load: ServerLoad | None,
    rss_peak_mb: float | None,
    kind: str,
    references: str,
) -> SweepStep:
    m = arm.metrics
    n = arm.spec.concurrency
    breaches = []
    limited = client_limit(arm)
    if m is not None and limited is None:
        for name, limit, dist in (
            ("TTFT", config.slo_ttft_p99_s, m.ttft_s),
            ("ITL", config.slo_itl_p99_s, m.itl_s),
        ):
            if limit is not None and dist is not None and dist.p99 > limit:
                breaches.append(f"{name} p99 {dist.p99:.3f}s over the SLO {limit:.3f}s")
    slo_given = limited is None and (
        config.slo_ttft_p99_s is not None or config.slo_itl_p99_s is not None
    )
    speedup = comparison.decode_speedup if comparison is not None else None
    findings, judged = judgement
    hard = [f for f in findings if f.hard]
    correct = False if hard else (True if judged_answers(judged) else None)
    reasons = reason_lines(hard) if hard else (
        [] if correct else ["nothing judged: no answer of the step could be judged"]
    )
    return SweepStep(
        n=n,
        arm=arm.spec.name,
        kind="bisect" if kind == "bisect" else "sweep",
        references=references,
        correct=correct,
        reasons=reasons,
        hard_kinds=sorted({f.kind.value for f in hard}),
        requests=len(arm.sessions),
        errors=sum(1 for s in arm.sessions if s.error is not None),
        decode_tokens_per_s=m.decode_tokens_per_s if m else None,
        output_tokens_per_s=m.output_tokens_per_s if m else None,
        mixed_speedup=mixed_speedup,
        per_session_decode_tokens_per_s=m.per_session_decode_tokens_per_s if m else None,
        prefill_tokens_per_s=m.prefill_tokens_per_s if m else None,
        speedup=speedup,
        scaling_efficiency=None if speedup is None else speedup / n,
        within_slo=(not breaches) if slo_given else None,
        slo_breaches=breaches,
        client_limited=limited,
        server_load=load,
        client_overlap_max=most_at_once([s for s in arm.sessions if s.ok]),
        engine_rss_peak_mb=rss_peak_mb,
        wall_s=round(m.wall_s, 3) if m else 0.0,
    )


def failure_rule(step: SweepStep) -> StopRule:
    """ERRORS when every failure of the step is an errored request, else INCORRECT."""
    only_errors = set(step.hard_kinds) <= {FindingKind.ERROR.value}
    return StopRule.ERRORS if only_errors else StopRule.INCORRECT


def knee(steps: Sequence[SweepStep]) -> int | None:
    """The depth after which throughput stopped growing: the first one followed by at least
    two steps, none of which beats the best so far by 10% or more (a dip followed by growth
    is no knee). Throughput is the step's speedup (its raw rate when it has none)."""
    rates = [
        (s.n, s.speedup if s.speedup is not None else s.decode_tokens_per_s)
        for s in steps
        if s.kind == "sweep"
    ]
    best = 0.0
    for i, (n, rate) in enumerate(rates[:-2]):
        best = max(best, rate or 0.0)
        later = [r for _, r in rates[i + 1 :]]
        if best > 0 and all(r is not None and r < best * (1 + KNEE_GROWTH) for r in later):
            return n
    return None


def envelope(
    baseline: ArmResult | None, steps: Sequence[SweepStep], notes: Sequence[str] = (),
    throughput: Sequence[PairedThroughput] = (),
) -> Envelope:
    start = paired(throughput, "start")
    ordered = sorted(
        (s.model_copy(update={"paired_speedup": start.interval})
         if start is not None and s.n == start.n else s for s in steps),
        key=lambda s: s.n,
    )
    judged = [s for s in ordered if s.correct is not None]
    failing = [s for s in judged if s.correct is False]
    first_fail = failing[0] if failing else None
    correct_below = [
        s.n for s in judged if s.correct and (first_fail is None or s.n < first_fail.n)
    ]
    rated = [s for s in ordered if s.decode_tokens_per_s is not None]
    peak = max(rated, key=lambda s: s.decode_tokens_per_s or 0.0, default=None)
    # Within the SLOs: every step below the first breach (None when no SLO was given).
    breached = [s.n for s in ordered if s.within_slo is False]
    slo = [s.n for s in ordered if s.within_slo and (not breached or s.n < breached[0])]
    queued = [
        s.server_load.running_max
        for s in ordered
        if s.server_load is not None and (s.server_load.waiting_max or 0) > 0
    ]
    env = Envelope(
        baseline=baseline.spec.name if baseline is not None else "",
        baseline_decode_tokens_per_s=(
            baseline.metrics.decode_tokens_per_s if baseline and baseline.metrics else None
        ),
        steps=ordered,
        largest_correct_n=max(correct_below, default=None),
        first_failing_n=first_fail.n if first_fail else None,
        failing_evidence=first_fail.reasons if first_fail else [],
        largest_within_slo_n=max(slo, default=None),
        peak_decode_tokens_per_s=peak.decode_tokens_per_s if peak else None,
        peak_n=peak.n if peak else None,
        knee_n=knee(ordered),
        engine_cap=max(queued) if queued else None,
        notes=list(notes),
        throughput=list(throughput),
    )
    env.threshold_pinned = (
        env.first_failing_n is not None
        and env.largest_correct_n is not None
        and env.first_failing_n == env.largest_correct_n + 1
    )
    if env.engine_cap is not None:
        env.notes.append(
            f"the server ran at most {env.engine_cap} request(s) at once and queued the rest: "
            "its own batch cap (slots, max-num-seqs), not batchprobe's"
        )
    return env
