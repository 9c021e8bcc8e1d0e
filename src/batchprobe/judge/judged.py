"""How many answers a run judged: the one count that says whether a verdict rests on anything.

A verdict whose every request failed before an answer came back (a server that answers
HTTP 500 to everything) judged nothing: it is neither correct nor a failure of batching.
``bisect`` (a good version) and the corpus (a fixed version) both require a count above 0.
"""

from __future__ import annotations

from collections import defaultdict

from batchprobe.results.findings import CheckName
from batchprobe.results.models import Report

# The checks that judge an answer's content; the others judge the run or the arm (it completed,
# its warm-up, the server stayed up, requests did not fail, what the server does not serve).
ANSWER_CHECKS: frozenset[CheckName] = frozenset(
    {"cross_talk", "recall", "count", "length", "bias", "stop", "usage", "greedy"}
)


def judged_items(report: Report) -> int:
    """Answers judged in ``report``: from its ``judged`` counts when the judge recorded them
    (per arm, step and shape, the most any answer check judged), else the answers that came
    back without an error (each one is scored for cross-talk at least)."""
    if report.judged:
        most: dict[tuple[str, int | None, str | None], int] = defaultdict(int)
        for row in report.judged:
            if row.check in ANSWER_CHECKS:
                key = (row.arm, row.step, row.shape)
                most[key] = max(most[key], row.judged)
        return sum(most.values())
    return sum(1 for arm in report.arms for s in arm.sessions if s.ok)
