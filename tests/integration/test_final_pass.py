"""One final pass: a hard finding that only the run's last judgement can make (the greedy rows
beside sampled ones diverging far more than their controls, pooled over every step) fails
the steps holding its sessions in every view: the envelope, the step rows, JUnit, CSV and
HTML, and the verdict's parallel figure comes from no failing step."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from batchprobe.report import render_csv, render_html
from batchprobe.results import Outcome
from batchprobe.results.findings import FindingKind

from .judgeprobe import default_run, junit_failures


def test_a_finding_of_the_final_pass_fails_its_steps_everywhere(tmp_path: Path) -> None:
    report, _ = default_run(
        tmp_path, "sampled", fault="param_leak", fault_when="params", logprobs_format="none"
    )
    assert report.verdict.outcome is Outcome.FAIL
    pooled = [f for f in report.findings if f.kind is FindingKind.SAMPLED_DIVERGENCE and f.hard]
    assert pooled, report.verdict.reasons
    sessions = {s for f in pooled for s in f.sessions}
    arms = {a.spec.name: a for a in report.arms}
    env = report.envelope
    assert env is not None
    failing = [s for s in env.steps if sessions & {x.session for x in arms[s.arm].sessions}]
    assert failing, "the pooled finding names no step's session"
    for step in failing:
        assert step.correct is False, (step.arm, step.reasons)
        assert FindingKind.SAMPLED_DIVERGENCE.value in step.hard_kinds
    assert env.first_failing_n == min(s.n for s in failing)
    assert env.largest_correct_n is None or env.largest_correct_n < env.first_failing_n
    # The parallel figure is no failing step's.
    assert not any(f"at {s.n} in flight" in r for s in failing for r in report.verdict.reasons)
    failed = junit_failures(report, tmp_path)
    for step in failing:
        assert f"batchprobe.envelope.{step.arm}" in failed, (step.arm, sorted(failed))
    rows = list(csv.DictReader(io.StringIO(render_csv(report))))
    correct_of = {r["arm"]: r.get("correct") for r in rows if r.get("arm") in {s.arm for s in failing}}
    assert correct_of and all(v in ("False", "false", "0") for v in correct_of.values()), correct_of
    html = render_html(report)
    for step in failing:
        rows = re.findall(rf'<tr class="step-(\w+)[^"]*"[^>]*>\s*<td[^>]*>{step.n}\b', html)
        assert rows and set(rows) == {"wrong"}, (step.arm, rows)
