"""Sending the references the judge asks for: the items it names, alone, in rounds.

The judge (``judge.references``) names sessions; this turns them into serial plans (a later
conversation turn brings the turns before it, since its prompt is built from their answers)
and keeps the rounds' tally for the verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from batchprobe.judge.references import Wanted, more, references, wanted
from batchprobe.results.arms import ArmResult
from batchprobe.results.items import WorkItem
from batchprobe.workload.shapes import ShapePlan


def reference_plans(plans: Sequence[ShapePlan], sessions: set[int]) -> list[ShapePlan]:
    """The items of ``sessions`` as serial plans, each later turn behind its earlier ones."""
    out = []
    for plan in plans:
        by_session = {i.session: i for i in plan.items}
        keep: set[int] = set()
        for item in plan.items:
            current: WorkItem | None = item if item.session in sessions else None
            while current is not None and current.session not in keep:
                keep.add(current.session)
                before = current.turn.continues if current.turn is not None else None
                current = by_session.get(before) if before is not None else None
        items = [i for i in plan.items if i.session in keep]
        if items:
            out.append(dataclasses.replace(plan, items=items, sends=[]))
    return out


@dataclass
class ReferenceRounds:
    """The rounds of one run's references: the first (the sample, the compared rows, the first
    wrong answers of each kind), then the rest of the kinds the model can do alone."""

    plans: Sequence[ShapePlan]
    arms: list[ArmResult]
    slack: int
    seed: int
    asked: set[int] = field(default_factory=set)
    sample: set[int] = field(default_factory=set)
    skipped: int = 0

    every: bool = False
    """Every item, in one round (``--references every``)."""

    def next(self, index: int) -> list[ShapePlan]:
        if self.every:
            fresh = {i.session for p in self.plans for i in p.items} if index == 0 else set()
            return self._send(fresh)
        answers = [s for a in self.arms if a.spec.role in ("step", "pressure") for s in a.sessions]
        refs = references(self.arms)
        want: Wanted
        if index == 0:
            want = wanted(answers, refs, self.slack, self.seed)
            self.sample = want.sample
        elif index == 1:
            want = more(answers, refs, self.slack)
            self.skipped = sum(len(s) for s in want.skipped.values())
        else:
            return []
        return self._send(want.sessions - self.asked)

    def _send(self, sessions: set[int]) -> list[ShapePlan]:
        """The plans for ``sessions``, tallied with the earlier turns they bring along."""
        plans = reference_plans(self.plans, sessions)
        self.asked |= {i.session for p in plans for i in p.items}
        return plans
