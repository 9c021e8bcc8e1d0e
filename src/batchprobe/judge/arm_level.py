"""The findings of an arm as a whole, not of one answer: a full KV pool that failed what it
had taken, requests dropped by their clients that the server ran on, a failed warm-up, an arm
that did not run or complete, a server that stopped answering."""

from __future__ import annotations

from batchprobe.results.arms import ArmResult
from batchprobe.results.findings import Finding, FindingKind, Severity
from batchprobe.results.sessions import SessionResult, refused_up_front
from batchprobe.results.thresholds import Thresholds


def step_of(arm: ArmResult) -> int | None:
    return arm.spec.depth


def _capacity(arm: ArmResult, t: Thresholds) -> Finding | None:
    """Requests its clients dropped that the server went on running: hard when some still
    ran at the deadline after the step's last request ended (the capacity is gone for good),
    soft when the server ran more requests than were open for longer than the grace."""
    c = arm.capacity
    if c is None:
        return None
    dropped = [s.session for s in arm.sessions if s.hung_up]
    severity: Severity = "hard"
    said = (f"{c.source} counted up to {c.excess_max} request(s) running beyond those the client "
            f"had open, for {c.excess_s:.1f} s at most, after {c.hung_up} client abort(s)")
    if c.drained_s is None:
        message = (f"dropped requests never stopped: {said}; {c.deadline_s:.0f} s after the "
                   "step's last request ended the server still ran some (capacity lost for good)")
    elif c.excess_s > t.abort_grace_s:
        message = (f"dropped requests ran on: {said} (beyond the {t.abort_grace_s:g} s grace); "
                   f"the server ran none {c.drained_s:.1f} s after the step (capacity lost "
                   "while they ran)")
        severity = "soft"
    else:
        return None
    return Finding(arm=arm.spec.name, step=step_of(arm), shape="aborts",
                   kind=FindingKind.ABORT_IGNORED, severity=severity, sessions=dropped,
                   evidence=f"excess {c.excess_max} for {c.excess_s:.1f} s; drained "
                   + ("never" if c.drained_s is None else f"after {c.drained_s:.1f} s"),
                   message=message)


def pool_failures(arm: ArmResult) -> list[SessionResult]:
    """The pressure wave's requests the server took and then failed (not those it refused
    up front with 429/503, not the oversize one, judged on its own)."""
    p = arm.pressure
    if p is None:
        return []
    return [s for s in arm.sessions if s.error is not None and not refused_up_front(s)
            and (s.situation is None or s.situation.role != "oversize")]


def _listed(sessions: list[int], most: int = 8) -> str:
    more = f" and {len(sessions) - most} more" if len(sessions) > most else ""
    return ", ".join(map(str, sessions[:most])) + more


def _pool(arm: ArmResult) -> list[Finding]:
    """A full KV pool that failed requests each of which fits alone (the scheduler admitted
    more than the pool holds), and an oversize request that got neither an answer nor an
    error within its deadline."""
    p = arm.pressure
    if p is None:
        return []
    found = []
    failed = pool_failures(arm)
    if failed:
        peak = (f"{p.peak_tokens} tokens in flight at the peak" if p.peak_tokens is not None
                else f"{p.planned_tokens} tokens planned in flight")
        first = failed[0].error
        said = f": {first.message}" if first is not None else ""
        found.append(Finding(
            arm=arm.spec.name, step=step_of(arm), shape="pressure", kind=FindingKind.KV_POOL,
            sessions=[s.session for s in failed],
            evidence=f"{len(failed)} of {p.requests} failed; pool {p.pool.tokens}",
            message=(f"sessions {_listed([s.session for s in failed])}: {len(failed)} of "
                     f"{p.requests} running requests failed when the KV pool "
                     f"filled ({peak} against a pool of {p.pool.tokens}, {p.pool.source}); "
                     f"each fits alone ({p.tokens_per_request} tokens), so the server admitted "
                     f"more than its pool holds and failed what it had taken{said}"),
        ))
    if p.oversize == "hung":
        oversize = [s.session for s in arm.sessions
                    if s.situation is not None and s.situation.role == "oversize"]
        found.append(Finding(
            arm=arm.spec.name, step=step_of(arm), shape="pressure", kind=FindingKind.KV_POOL,
            sessions=oversize, evidence=f"no reply in {p.oversize_deadline_s:.0f} s",
            message=(f"session {_listed(oversize)}, a request larger than the KV pool "
                     f"({p.oversize_tokens} prompt tokens "
                     f"against {p.pool.tokens}) got neither an error nor an answer within "
                     f"{p.oversize_deadline_s:.0f} s: it hangs instead of being refused"),
        ))
    return found


def arm_level(arm: ArmResult, t: Thresholds) -> list[Finding]:
    base = {"arm": arm.spec.name, "step": step_of(arm)}
    found = _pool(arm)
    capacity = _capacity(arm, t)
    if capacity is not None:
        found.append(capacity)
    if arm.warm_up_error is not None:
        e = arm.warm_up_error
        found.append(Finding(**base, kind=FindingKind.WARM_UP, error_kind=e.kind,  # type: ignore[arg-type]
                             evidence=e.message,
                             message=f"the warm-up request failed ({e.kind.value}): {e.message}"))
    if arm.error is not None:
        found.append(Finding(**base, kind=FindingKind.NOT_RUN, message=arm.error))  # type: ignore[arg-type]
    if arm.server_alive_after is False:
        dropped = [s for s in arm.sessions if s.hung_up]
        found.append(Finding(**base, kind=FindingKind.SERVER_DEAD,  # type: ignore[arg-type]
                             sessions=[s.session for s in dropped],
                             message="the server stopped answering (no 1-token generation)"
                             + _after_aborts(dropped)))
    if arm.state in ("failed", "interrupted", "running", "pending"):
        severity = "hard" if arm.state == "failed" else "info"
        found.append(Finding(**base, kind=FindingKind.NOT_RUN, severity=severity,  # type: ignore[arg-type]
                             message=f"did not complete (state {arm.state})"))
    return found


def _waiting(s: SessionResult) -> list[int]:
    return (s.situation.waiting_at_hang_up or []) if s.situation is not None else []


def _after_aborts(dropped: list[SessionResult]) -> str:
    """What a server that stopped serving had been through: its clients' hang-ups, and who
    waited for a first token (in prefill, or queued) at each."""
    if not dropped:
        return ""
    drops = "; ".join(
        f"session {s.session} hung up after {len(s.chunk_ends)} chunk(s)"
        + (f" while session(s) {', '.join(map(str, _waiting(s)))} waited for their first token"
           if _waiting(s) else "")
        for s in dropped[:4]
    )
    more = f" (and {len(dropped) - 4} more)" if len(dropped) > 4 else ""
    return f", after {len(dropped)} client abort(s) in this step: {drops}{more}"
