"""A failure as a case to replay: the wave that held it, request by request, as data.

Built from a verdict file alone (schema 4.0 holds every request as sent): the failure to keep
(its kind, its session, the sessions it named as sources), each request of its wave with its
arrival offset, and what the judge reads to call the same failure again (the planted needles
and counts, the serial references of the wave's items); the model (``repro.json``) is
``results.repro``.
"""

from __future__ import annotations

from batchprobe.errors import ReportError
from batchprobe.results.findings import Finding, FindingKind
from batchprobe.results.models import Report
from batchprobe.results.repro import Kept, ReproCase, ReproRequest, Target

__all__ = ["KEPT_KINDS", "Kept", "ReproCase", "ReproRequest", "Target", "case_from"]

# What a replay can call again: an answer's own failure, which a wave of requests sets off.
# (A server that died, a full pool, a flip rate or a divergence over many steps are not one
# request's wrong answer.)
KEPT_KINDS = frozenset({
    FindingKind.CROSS_TALK, FindingKind.RECALL_MISS, FindingKind.COUNT_BROKE,
    FindingKind.ENDED_EARLY, FindingKind.ERROR, FindingKind.STREAM, FindingKind.USAGE,
    FindingKind.BIAS, FindingKind.STOP, FindingKind.CONSTRAINT, FindingKind.CHOICES,
    FindingKind.SAMPLED,
})


def _kept(report: Report, finding_id: int | None, session: int | None) -> Finding:
    """The failure to keep: the one asked for, else the first hard one a replay can show."""
    hard = [f for f in report.findings if f.hard]
    if finding_id is not None:
        if not 0 <= finding_id < len(report.findings):
            raise ReportError(f"--finding {finding_id}: the verdict has findings 0 to "
                              f"{len(report.findings) - 1}")
        chosen = report.findings[finding_id]
        if not chosen.hard or chosen.kind not in KEPT_KINDS or not chosen.sessions:
            raise ReportError(f"--finding {finding_id} ({chosen.kind.value}, {chosen.severity}) "
                              "is not a hard failure of a request that a replay can show")
        return chosen
    keepable = [f for f in hard if f.kind in KEPT_KINDS and f.sessions]
    if session is not None:
        keepable = [f for f in keepable if session in f.sessions]
        if not keepable:
            raise ReportError(f"--session {session}: no hard failure of the verdict names it")
    if not keepable:
        kinds = sorted({f.kind.value for f in hard})
        raise ReportError(
            "the verdict has no hard failure of a request to reproduce"
            + (f" (its hard findings: {', '.join(kinds)})" if kinds else " (it holds no hard finding)")
        )
    return keepable[0]


def case_from(report: Report, finding_id: int | None = None, session: int | None = None) -> ReproCase:
    """The failing wave of ``report`` as a case (``ReportError`` when there is none)."""
    finding = _kept(report, finding_id, session)
    target_session = session if session is not None else finding.sessions[0]
    arm = report.arm(finding.arm)
    if arm is None or not arm.sessions:
        raise ReportError(f"the failure's arm {finding.arm} holds no requests")
    failing = next(
        (s for s in arm.sessions if s.session == target_session and s.situation is not None), None
    )
    if failing is None or failing.situation is None:
        raise ReportError(f"session {target_session} is not in arm {finding.arm}")
    # The wave the failure belongs to: a step's mixed wave starts where its throughput
    # phase ends; a plain arm sends one shape's wave at a time.
    shape = failing.situation.shape
    record = next((r for r in (report.sweep_run.steps if report.sweep_run else [])
                   if r.arm == arm.spec.name), None)
    if record is not None and failing in arm.sessions[record.mixed_from:]:
        wave = arm.sessions[record.mixed_from:]
    else:
        wave = [s for s in arm.sessions if s.situation is not None and s.situation.shape == shape]
    # A stream its own client hung up is left out: its drop is not replayed.
    sent = [s for s in wave if s.situation is not None and s.item is not None and not s.hung_up]
    start = min(s.start_s for s in sent)
    requests = [
        ReproRequest(
            session=s.session, copy_index=s.situation.copy_index,  # type: ignore[union-attr]
            item=report.items[s.item],  # type: ignore[index]
            planned=report.items[s.planned] if s.planned is not None else None,
            offset_s=round(max(0.0, s.start_s - start), 4),
            phase=s.situation.phase,  # type: ignore[union-attr]
            after=s.situation.after,  # type: ignore[union-attr]
            delay_s=s.situation.delay_s,  # type: ignore[union-attr]
            prefix_cache=s.situation.prefix_cache,  # type: ignore[union-attr]
        )
        for s in sorted(sent, key=lambda s: s.start_s)
    ]
    sessions = {r.session for r in requests}
    refs = [s for a in report.arms if a.spec.role == "reference" or a is report.arms[0]
            for s in a.sessions if s.session in sessions and a is not arm]
    cfg = report.config
    return ReproCase(
        run_id=report.run_id,
        target=Target(
            base_url=cfg.base_url, engine=cfg.engine,
            engine_version=report.environment.engine_version,
            model=report.environment.served_model, model_arg=cfg.model,
            patches=list(report.patches_applied), engine_args=list(cfg.engine_args),
            diagnoses=[d for d in report.diagnoses if d.known],
            environment=(f"batchprobe {report.environment.batchprobe_version}, Python "
                         f"{report.environment.python}, {report.environment.platform}"),
        ),
        kept=Kept(kind=finding.kind, session=target_session, sources=list(finding.sources),
                  arm=finding.arm, message=finding.message),
        concurrency=arm.spec.concurrency,
        mode=arm.spec.mode,
        prompt_style=cfg.prompt_style,
        sending=report.sending,
        # As the run sent them: a cached wave leaves llama.cpp's prompt cache as users run it.
        cache_body={k: v for k, v in report.sending.extra_body.items() if k != "cache_prompt"},
        requests=requests,
        planted=report.planted,
        references=refs,
        thresholds=cfg.thresholds,
    )
