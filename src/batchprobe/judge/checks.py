"""The findings as named checks: one per arm (or step) × shape × check, plus the run's own.

A rendering of ``report.findings`` and ``report.judged``, never a second judgement: a check
fails when a hard finding of its arm, shape and check exists, passes when it judged answers
and none failed (soft findings named in its message), and is skipped when it judged nothing.
JUnit renders one test case per check and ``batchprobe compare --gate`` gates on checks that
passed in one run and fail in another, so a check's ``name`` is stable across runs of a plan.
"""

from __future__ import annotations

from collections import defaultdict
from enum import Enum

from pydantic import BaseModel, ConfigDict

from batchprobe.results.findings import Finding
from batchprobe.results.models import Outcome, Report, Status

_SHOWN = 3


class CheckStatus(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # not judged (no data, or the baseline cannot do the task)


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group: str  # an arm's name, or "run"
    shape: str | None = None
    kind: str  # a CheckName, or a run-level check (status, outcome, correct, parallel, envelope)
    status: CheckStatus
    message: str

    @property
    def name(self) -> str:
        return f"{self.group}.{self.shape}.{self.kind}" if self.shape else f"{self.group}.{self.kind}"


def _messages(findings: list[Finding]) -> str:
    shown = [f.message for f in findings[:_SHOWN]]
    more = len(findings) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")


def _check(group: str, shape: str | None, kind: str, found: list[Finding], judged: int) -> Check:
    hard = [f for f in found if f.hard]
    soft = [f for f in found if f.severity == "soft"]
    if hard:
        return Check(group=group, shape=shape, kind=kind, status=CheckStatus.FAILED,
                     message=_messages(hard))
    if judged or soft:
        note = f"; soft: {_messages(soft)}" if soft else ""
        what = f"{judged} answer(s) judged" if judged else "judged"
        return Check(group=group, shape=shape, kind=kind, status=CheckStatus.PASSED,
                     message=f"{what}, none failed{note}")
    why = _messages(found) if found else "nothing judged"
    return Check(group=group, shape=shape, kind=kind, status=CheckStatus.SKIPPED, message=why)


def _arm_checks(report: Report) -> list[Check]:
    findings: dict[tuple[str, str | None, str], list[Finding]] = defaultdict(list)
    for f in report.findings:
        findings[(f.arm, f.shape, f.check)].append(f)
    judged: dict[tuple[str, str | None, str], int] = defaultdict(int)
    for j in report.judged:
        judged[(j.arm, j.shape, j.check)] += j.judged
    groups = [a.spec.name for a in report.arms]
    groups += [f.arm for f in report.findings if f.arm not in groups and f.arm != "run"]
    checks: list[Check] = []
    for group in dict.fromkeys(groups):
        arm = report.arm(group)
        done = arm is not None and arm.state == "done"
        for kind in ("completed", "warm_up", "server_alive"):
            found = findings.pop((group, None, kind), [])
            checks.append(_check(group, None, kind, found, 1 if done else 0))
        keys = sorted({k for k in (*findings, *judged) if k[0] == group},
                      key=lambda k: (k[1] or "", k[2]))
        checks += [_check(group, shape, kind, findings.get((group, shape, kind), []),
                          judged.get((group, shape, kind), 0))
                   for _, shape, kind in keys]
    run_level = [f for f in report.findings if f.arm == "run"]
    for shape, kind in dict.fromkeys((f.shape, f.check) for f in run_level):
        found = [f for f in run_level if (f.shape, f.check) == (shape, kind)]
        checks.append(_check("run", shape, kind, found, 0))
    return checks


def _run_check(kind: str, failed: bool | None, message: str) -> Check:
    status = (CheckStatus.SKIPPED if failed is None
              else CheckStatus.FAILED if failed else CheckStatus.PASSED)
    return Check(group="run", kind=kind, status=status, message=message)


def _run_checks(report: Report) -> list[Check]:
    v = report.verdict
    first = v.reasons[0] if v.reasons else ""
    parallel = v.parallel_reason or "parallelism not judged"
    checks = [
        _run_check("status", report.status is not Status.OK, f"status {report.status.value}"),
        _run_check("outcome", v.outcome is not Outcome.PASS, f"{v.outcome.value}: {first}"),
        _run_check("correct", None if v.correct is None else not v.correct, first),
        _run_check("parallel", None if v.parallel is None else not v.parallel, parallel),
    ]
    env = report.envelope
    if env is not None:
        failing = env.first_failing_n is not None
        text = (f"correct up to N={env.largest_correct_n}; first wrong at N={env.first_failing_n}"
                if failing else f"correct up to N={env.largest_correct_n}")
        checks.append(_run_check("envelope", failing, text))
    return checks


def run_checks(report: Report) -> list[Check]:
    """Every check of the run, arms in order, then the run-wide ones."""
    return _arm_checks(report) + _run_checks(report)


def arm_correct(checks: list[Check], arm: str) -> bool | None:
    """False when a check of ``arm`` failed, True when one of its shapes' checks passed."""
    mine = [c for c in checks if c.group == arm]
    if any(c.status is CheckStatus.FAILED for c in mine):
        return False
    return True if any(c.status is CheckStatus.PASSED and c.shape for c in mine) else None
