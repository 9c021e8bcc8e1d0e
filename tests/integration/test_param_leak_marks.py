"""Each per-row parameter of the params wave leaves a mark when a server applies it to
another row, and the default run names both rows: the answer that shows it (``sessions``)
and the row whose parameter it is (``sources``), without serial cross-talk on any count."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.results import Outcome, Report
from batchprobe.results.findings import FindingKind

from .judgeprobe import default_run

# fake fault -> (the finding kind on the neighbour, the role of the row it names).
LEAKS = {
    "stop_shared": (FindingKind.STOP, "stop"),
    "bias_leak": (FindingKind.BIAS, "bias"),
    "penalty_leak": (FindingKind.COUNT_BROKE, "penalty"),
}


def _roles(report: Report) -> dict[int, str | None]:
    return {s.session: s.situation.role for a in report.arms for s in a.sessions
            if s.situation is not None and s.shape == "params"}


@pytest.mark.parametrize("fault", list(LEAKS))
def test_a_leaked_parameter_names_its_source_row(tmp_path: Path, fault: str) -> None:
    kind, role = LEAKS[fault]
    report, _ = default_run(tmp_path, fault, fault=fault, fault_when="params")
    assert report.verdict.outcome is Outcome.FAIL, report.verdict.reasons
    roles = _roles(report)
    marked = [f for f in report.findings if f.hard and f.kind is kind and f.shape == "params"
              and f.sources and set(f.sources).isdisjoint(f.sessions)]
    assert marked, [(f.shape, f.kind.value, f.sources, f.message[:90]) for f in report.findings
                    if f.hard]
    for f in marked:
        assert {roles.get(s) for s in f.sources} == {role}, (f.sources, roles)
    first = marked[0]
    line = next(r for r in report.verdict.reasons if f"session {first.sessions[0]}" in r)
    assert all(str(s) in line for s in first.sources), line
    # A parameter is not a count: no leak is read as another session's numbers.
    assert not [f for f in report.findings if f.kind is FindingKind.CROSS_TALK]
