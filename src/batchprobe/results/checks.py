"""The verdict as named checks: one per arm and concern, plus the run's own.

JUnit renders one test case per check and `batchprobe compare` gates on checks that passed in
one run and fail in another, so a check's ``name`` is stable across runs of the same plan.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict

from batchprobe.results.models import ArmComparison, ArmResult, Report, Status

CheckKind = Literal[
    "status", "completed", "errors", "cross_talk", "server_alive", "recall", "greedy", "parallel"
]


class CheckStatus(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # not judged (no data, or the baseline cannot do the task)


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group: str  # an arm's name, or "run"
    kind: CheckKind
    status: CheckStatus
    message: str

    @property
    def name(self) -> str:
        return f"{self.group}.{self.kind}"


def _check(group: str, kind: CheckKind, failed: bool | None, message: str) -> Check:
    if failed is None:
        status = CheckStatus.SKIPPED
    else:
        status = CheckStatus.FAILED if failed else CheckStatus.PASSED
    return Check(group=group, kind=kind, status=status, message=message)


def _errors(arm: ArmResult) -> Check:
    m = arm.metrics
    if m is None:
        return _check(arm.spec.name, "errors", None, "no metrics: the arm did not complete")
    if not m.errors_by_kind:
        return _check(arm.spec.name, "errors", False, f"{m.sessions} sessions, no errors")
    kinds = ", ".join(f"{k.value} x{n}" for k, n in sorted(m.errors_by_kind.items()))
    return _check(
        arm.spec.name, "errors", True,
        f"{m.sessions - m.ok_sessions}/{m.sessions} sessions errored ({kinds})",
    )


def _cross_talk(arm: ArmResult) -> Check:
    if arm.metrics is None:
        return _check(arm.spec.name, "cross_talk", None, "no metrics: the arm did not complete")
    leaks = [
        f"session {s.session} got the code of {', '.join(map(str, s.cross_talk_from))}"
        for s in arm.sessions
        if s.cross_talk_from
    ]
    if not leaks:
        return _check(arm.spec.name, "cross_talk", False, "no session got another's needle")
    return _check(arm.spec.name, "cross_talk", True, "cross-talk: " + "; ".join(leaks))


def _alive(arm: ArmResult) -> Check:
    alive = arm.server_alive_after
    message = {True: "the server answered after the arm", False: "the server stopped answering",
               None: "not checked"}[alive]
    return _check(arm.spec.name, "server_alive", None if alive is None else not alive, message)


def _recall(report: Report, arm: ArmResult, comp: ArmComparison | None) -> Check:
    t = report.config.thresholds
    base = report.arms[0].metrics if report.arms else None
    base_recall = base.recall if base else None
    name = arm.spec.name
    if base_recall is None or arm.metrics is None or arm.metrics.recall is None:
        return _check(name, "recall", None, "no recall measured")
    if base_recall < t.recall_floor:
        return _check(
            name, "recall", None,
            f"not judged: baseline recall {base_recall:.0%} is under the {t.recall_floor:.0%} floor",
        )
    figure = f"recall {arm.metrics.recall_hits}/{arm.metrics.recall_sessions}"
    if comp is None or comp.recall_delta is None:
        return _check(name, "recall", False, f"{figure} (baseline)")
    drop = -comp.recall_delta
    verdict = "beyond" if drop > t.max_recall_drop else "within"
    return _check(
        name, "recall", drop > t.max_recall_drop,
        f"{figure}, {comp.recall_delta:+.0%} against {comp.baseline} "
        f"({verdict} the {t.max_recall_drop:.0%} tolerance)",
    )


def _greedy(report: Report, comp: ArmComparison) -> Check:
    if not comp.greedy_compared:
        return _check(comp.arm, "greedy", None, "no greedy outputs compared")
    differ = comp.greedy_compared - comp.greedy_matches
    strict = report.config.thresholds.strict_greedy
    figure = f"{comp.greedy_matches}/{comp.greedy_compared} greedy outputs equal to {comp.baseline}"
    soft = "" if strict or not differ else " (a soft signal: fails only with --strict-greedy)"
    return _check(comp.arm, "greedy", strict and differ > 0, figure + soft)


def _parallel(report: Report) -> Check:
    widest = max(report.arms[1:], key=lambda a: a.spec.concurrency, default=None)
    comp = report.comparison(widest.spec.name) if widest else None
    threshold = report.config.thresholds.min_speedup
    if widest is None or comp is None or comp.decode_speedup is None:
        return _check("run", "parallel", None, "parallelism not measured")
    message = (f"decode speedup {comp.decode_speedup:.2f}x at {widest.spec.concurrency} sessions "
               f"over {comp.baseline} (threshold {threshold:.2f}x)")
    parallel = report.verdict.parallel
    return _check("run", "parallel", None if parallel is None else not parallel, message)


def run_checks(report: Report) -> list[Check]:
    """Every check of the run, arms in order, then the run-wide ones."""
    checks: list[Check] = []
    for arm in report.arms:
        done = arm.state == "done"
        checks.append(_check(arm.spec.name, "completed", not done, f"arm state {arm.state}"
                             + (f": {arm.error}" if arm.error else "")))
        comp = report.comparison(arm.spec.name)
        checks += [_errors(arm), _cross_talk(arm), _alive(arm), _recall(report, arm, comp)]
        if comp is not None:
            checks.append(_greedy(report, comp))
    checks.append(_parallel(report))
    ok = report.status is Status.OK
    checks.append(_check("run", "status", not ok, f"status {report.status.value}"))
    return checks


# The checks that say whether an arm's answers were right (not how fast it was).
_CORRECTNESS: frozenset[CheckKind] = frozenset(
    {"completed", "errors", "cross_talk", "server_alive", "recall", "greedy"}
)


def arm_correct(checks: list[Check], arm: str) -> bool | None:
    """False when a correctness check of ``arm`` failed, True when one passed, else None."""
    mine = [c for c in checks if c.group == arm and c.kind in _CORRECTNESS]
    if any(c.status is CheckStatus.FAILED for c in mine):
        return False
    return True if any(c.status is CheckStatus.PASSED for c in mine) else None
