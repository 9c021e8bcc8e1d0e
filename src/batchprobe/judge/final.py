"""The final pass: the whole judgement of a run from its verdict file alone.

Every answer scored again from its saved request, every finding, every sweep step's record
and the envelope, the verdict and its reasons, the situations the run made. The run calls it
once at its end; ``batchprobe judge VERDICT.json`` calls it on a saved file with no server,
and says what the run said.
"""

from __future__ import annotations

from collections.abc import Sequence

from batchprobe.errors import ReportError
from batchprobe.judge.compare import compare
from batchprobe.judge.judge import Judgement, judge
from batchprobe.judge.score import rescore
from batchprobe.judge.steps import envelope, serial_s, step_record
from batchprobe.judge.throughput import history
from batchprobe.judge.verdict import decide, recall_floor
from batchprobe.results.findings import Finding, FindingKind, Judged, Severity
from batchprobe.results.models import ArmComparison, ArmResult, Report, Status
from batchprobe.results.shapes import ShapeStatus, Situations
from batchprobe.results.sweep import Envelope, StopRule, SweepStep, SweepStop

NO_SWEEP = "runs after a sweep only"


def baseline(arms: Sequence[ArmResult]) -> ArmResult | None:
    """The arm every speedup is over: the first, when it is a plain arm or the references."""
    first = arms[0] if arms else None
    return first if first is not None and first.spec.role in ("arm", "reference") else None


def comparisons(arms: Sequence[ArmResult]) -> list[ArmComparison]:
    """Every arm after the first against the baseline (none without one)."""
    base = baseline(arms)
    return [compare(a, base) for a in arms[1:]] if base else []


def final_steps(report: Report, findings: list[Finding], judged: list[Judged]) -> list[SweepStep]:
    """Every step's record from the run's findings (a finding belongs to a step by its arm,
    or by a session the step sent), and its speedup over the baseline the references
    measured."""
    run = report.sweep_run
    if run is None:
        return []
    arms = {a.spec.name: a for a in report.arms}
    refs = [a for a in report.arms if a.spec.role == "reference"]
    ref_names = {r.spec.name for r in refs}
    base = baseline(report.arms)
    steps = []
    for record in run.steps:
        arm = arms[record.arm]
        mine = {s.session for s in arm.sessions}
        own = [
            f for f in findings
            if f.arm in (record.arm, f"references@{record.n}") or (
                f.arm not in ref_names and mine & set(f.sessions)
                and f.kind is not FindingKind.NOT_JUDGED
            )
        ]
        counts = [j for j in judged if j.arm == record.arm]
        alone = serial_s(arm.sessions[record.mixed_from:], refs)
        mixed = (alone / record.mixed_wall_s
                 if alone is not None and record.mixed_wall_s > 0 else None)
        steps.append(step_record(
            arm, compare(arm, base) if base is not None else None, mixed, (own, counts),
            report.config, record.server_load, record.engine_rss_peak_mb, record.kind,
            record.references,
        ))
    return steps


def _final_stop(stop: SweepStop, env: Envelope) -> SweepStop:
    """A sweep that ran its plan but whose final pass fails a step stopped there: the
    envelope's first failing depth, not the plan's end."""
    if stop.rule is StopRule.PLAN_END and env.first_failing_n is not None:
        failing = env.step(env.first_failing_n)
        return SweepStop(
            rule=StopRule.ERRORS if failing is not None and set(failing.hard_kinds) <= {"error"}
            else StopRule.INCORRECT,
            at_n=env.first_failing_n,
            detail="; ".join(failing.reasons[:2]) if failing is not None else "",
        )
    return stop


def _not_run(report: Report) -> list[Finding]:
    """Planned arms that never started: a failure when the engine failed, else not judged."""
    ran = {a.spec.name for a in report.arms}
    status = report.status
    severity: Severity = "info" if status in (Status.INTERRUPTED, Status.OK) else "hard"
    return [
        Finding(arm=spec.name, kind=FindingKind.NOT_RUN, severity=severity,
                message=f"never ran (the run ended: {status.value})")
        for spec in report.config.arms
        if spec.name not in ran
    ]


def situations(arms: Sequence[ArmResult], kv_not_run: str | None = None) -> Situations:
    """What the run's concurrent arms made happen (aborts, retries, capacity checks, the
    wave past the KV pool, or why there was none)."""
    made = Situations(kv_not_run=kv_not_run)
    for arm in arms:
        if arm.pressure is not None:
            made.kv_pressure, made.kv_not_run = arm.pressure, None
        if arm.spec.concurrency > 1 and arm.spec.role != "reference":
            sits = [s.situation for s in arm.sessions if s.situation is not None]
            made.constrained += sum(1 for sit in sits if sit.constraint is not None)
            made.choice_rows += sum(1 for sit in sits if sit.choices is not None)
        dropped = {s.session for s in arm.sessions if s.hung_up}
        made.aborts += len(dropped)
        made.aborts_while_waiting += sum(
            1 for s in arm.sessions
            if s.hung_up and s.situation is not None and s.situation.waiting_at_hang_up
        )
        made.retries += sum(1 for s in arm.sessions if s.session in dropped and not s.hung_up
                            and s.situation is not None and s.situation.copy_index)
        if arm.capacity is not None:
            made.capacity_checked += 1
        elif dropped:
            why = ("capacity is read in sweep steps only" if arm.spec.role != "step" else
                   "requests of the step errored: the server's running count cannot tell "
                   "them from the dropped ones" if any(s.error for s in arm.sessions) else
                   "the server states no running count (/metrics, /slots)")
            made.not_checked.append(
                f"{arm.spec.name}: whether dropped requests stopped is not known ({why})"
            )
    return made


def cache_notes(arms: list[ArmResult]) -> list[str]:
    """For the verdict: which arm's waves ran with a prefix cache, and what it reported."""
    notes = []
    for arm in arms:
        for wave in arm.waves:
            if wave.prefix_cache.startswith("on"):
                reported = (
                    f"{wave.cached_prompt_tokens} cached prompt tokens reported"
                    if wave.cached_prompt_tokens is not None
                    else "no cached token counts reported"
                )
                notes.append(
                    f"arm {arm.spec.name}: wave {wave.shape} ran with the prefix cache "
                    f"{wave.prefix_cache}: {reported}; every other wave ran cold"
                )
    return notes


def skipped_shapes(shapes: list[ShapeStatus]) -> list[str]:
    skipped = [f"{s.shape} ({s.reason})" for s in shapes if not s.ran and s.reason != "not in --shapes"]
    return [f"shapes skipped: {'; '.join(skipped)}"] if skipped else []


def _sweep(report: Report, judgement: Judgement) -> None:
    """The envelope from the sweep's record and the findings; its history's findings."""
    run = report.sweep_run
    if run is None or not run.steps:
        return
    t = report.config.thresholds
    steps = final_steps(report, judgement.findings, judgement.judged)
    stop = run.stop or SweepStop(
        rule=StopRule.STOPPED_EARLY, detail=f"the run stopped: {report.status.value}"
    )
    env = envelope(baseline(report.arms), steps, run.notes, run.throughput)
    env.reference_sample, env.references_asked = run.reference_sample, run.references_asked
    env.stop = _final_stop(stop, env)
    report.envelope = env
    judgement.findings += history(env, t)


def final_pass(report: Report) -> None:
    """Judge ``report`` from what it holds: its findings, judged counts, comparisons, the
    envelope, the verdict and the situations, all made again (the run's own status and
    measurements stay as they are)."""
    rescore(report)
    t = report.config.thresholds
    report.comparisons = comparisons(report.arms)
    judgement = judge(report.arms, report.comparisons, t)
    judgement.findings += _not_run(report)
    report.findings, report.judged = judgement.findings, judgement.judged
    _sweep(report, judgement)
    base = baseline(report.arms)
    floor = recall_floor(base, t, report.envelope) if base is not None else None
    judgement.findings += [floor] if floor is not None else []
    report.verdict = decide(
        report.status, report.arms, report.comparisons, t, report.envelope,
        report.config.sweep, judgement, replay=report.config.replay is not None,
    )
    report.verdict.reasons += cache_notes(report.arms) + skipped_shapes(report.shapes)
    planned = report.sweep_run is not None
    report.situations = situations(
        report.arms, report.sweep_run.pressure_not_run if report.sweep_run else NO_SWEEP)
    if planned or report.situations.aborts or report.situations.not_checked:
        report.verdict.reasons.append(report.situations.describe())


def _unjudgeable(report: Report) -> str | None:
    """Why the file cannot be judged on its own, or None: an answer whose request it lost."""
    for arm in report.arms:
        for s in [*arm.sessions, *arm.replays, *arm.serial_replays]:
            if s.item is None or s.item not in report.items:
                return (f"arm {arm.spec.name}, session {s.session}: its request is not in the "
                        "file's items (a file edited by hand, or cut short while it was written)")
    return None


def rejudge(report: Report, source: str = "the verdict") -> Report:
    """A copy of ``report`` judged again from what it holds, with no server (the library's
    ``batchprobe judge``); :class:`ReportError` when the file lacks what the judge reads."""
    problem = _unjudgeable(report)
    if problem is not None:
        raise ReportError(f"{source}: cannot be judged again: {problem}")
    judged = report.model_copy(deep=True)
    final_pass(judged)
    return judged
