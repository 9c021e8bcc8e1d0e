"""The judge's counts, each defined once: how many answers a run judged, and recall.

``judged_answers``: the one count that says whether a verdict rests on anything. A verdict
whose every request failed before an answer came back (a server that answers HTTP 500 to
everything) judged nothing: it is neither correct nor a failure of batching. The verdict's
``judged_answers``, a sweep step's ``correct``, ``bisect`` (a good version) and the corpus (a
fixed version) all read it.

``recall``: of the recall answers that came back, how many found their own needle (their
self-check, ``answers.passed``). The arms' metrics and the verdict's recall floor read it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from batchprobe.judge.answers import passed
from batchprobe.results.findings import CheckName, Judged
from batchprobe.results.models import Report
from batchprobe.results.sessions import SessionResult

# The checks that judge an answer's content; the others judge the run or the arm (it completed,
# its warm-up, the server stayed up, requests did not fail, what the server does not serve).
ANSWER_CHECKS: frozenset[CheckName] = frozenset(
    {"cross_talk", "recall", "count", "length", "bias", "stop", "constraint", "choices", "usage",
     "stream", "greedy"}
)


def judged_answers(judged: Sequence[Judged]) -> int:
    """Answers whose content was judged: per arm, step and shape, the most any answer check
    judged (every answer that came back is judged for cross-talk at least)."""
    most: dict[tuple[str, int | None, str | None], int] = defaultdict(int)
    for row in judged:
        if row.check in ANSWER_CHECKS:
            key = (row.arm, row.step, row.shape)
            most[key] = max(most[key], row.judged)
    return sum(most.values())


def judged_items(report: Report) -> int:
    """Answers judged in ``report`` (``judged_answers`` of its judged counts)."""
    return judged_answers(report.judged)


class Recall(NamedTuple):
    """Recall answers that came back (no error) and how many of them found their own needle."""

    hits: int
    answered: int

    @property
    def rate(self) -> float | None:
        return self.hits / self.answered if self.answered else None


def recall(sessions: Iterable[SessionResult]) -> Recall:
    """The one definition of recall: an answered recall request whose self-check passed."""
    answered = [s for s in sessions if s.ok and s.workload == "recall"]
    return Recall(sum(1 for s in answered if passed(s) is True), len(answered))
