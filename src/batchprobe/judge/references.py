"""References on demand: which cold, alone answers the judge needs, and what came back.

An answer that checks itself needs no reference to be judged right: a recall answer with its
own code, a count that runs on to its max_tokens. The judge asks for a serial reference only
where one decides something:

- an answer that failed its self-check: the model's own miss, or a batching bug?
- an answer that stopped early or short of its max_tokens with no error (ended early?);
- a greedy row of the sampled-versus-control comparison, where the server gave no logprobs;
- a seeded sample per shape: greedy equality, usage (prompt tokens), the serial throughput
  baseline (the counting prompts of the burst's throughput phase).

Wrong answers are asked for by class (request path and workload) in two rounds: when the
first ``PER_CLASS`` references of a class all fail their own check too, the model cannot do
that class alone, and the rest of it is not judged (an info finding says so) rather than
each sent alone again.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from batchprobe.judge.answers import passed, refused, tokens
from batchprobe.results.arms import ArmResult
from batchprobe.results.sessions import SessionResult
from batchprobe.workload.shapes.params import COMPARED_ROLES

# References of wrong answers asked for in the first round, per class.
PER_CLASS = 3
# The seeded sample's counting prompts of the burst (the serial throughput baseline: decode
# tokens per second alone); the rest of it is one item per step and per shape.
SAMPLE_DECODE = 4


def is_reference(index: int, arm: ArmResult) -> bool:
    """A serial pass sent for references (a sweep's baseline, a bisection step's), or the
    first arm of a plan of arms (its serial baseline)."""
    return arm.spec.role == "reference" or (index == 0 and arm.spec.role == "arm")


@dataclass
class References:
    """The serial references of a run's items: passed, refused, or failed their own check."""

    passed: dict[int, SessionResult] = field(default_factory=dict)
    refused: dict[int, SessionResult] = field(default_factory=dict)
    failed: dict[int, SessionResult] = field(default_factory=dict)

    def __contains__(self, session: int) -> bool:
        return session in self.passed or session in self.refused or session in self.failed


def references(arms: Sequence[ArmResult]) -> References:
    refs = References()
    for index, arm in enumerate(arms):
        if not is_reference(index, arm):
            continue
        for s in arm.sessions:
            if s.situation is not None and s.situation.copy_index:
                continue
            if s.error is not None:
                (refs.refused if refused(s) else refs.failed)[s.session] = s
            elif passed(s) is False:
                refs.failed[s.session] = s
            else:
                refs.passed[s.session] = s
    return refs


def _max_tokens(s: SessionResult) -> int | None:
    return s.situation.max_tokens if s.situation is not None else None


def stopped_short(s: SessionResult, slack: int) -> bool:
    """A reply that ended on its own before its max_tokens where only a reference can say
    whether it should have: anything but a recall answer, which stops once it has answered,
    or a constrained one that fits its constraint, which ends where the constraint does."""
    limit = _max_tokens(s)
    if s.error is not None or limit is None or s.workload == "recall":
        return False
    if s.check is not None and s.check.kind == "constraint" and s.check.passed:
        return False
    return tokens(s) + slack < limit


def needs_reference(s: SessionResult, slack: int, logprobs: bool = True) -> bool:
    """Whether this concurrent answer's judgement rests on its cold serial reference
    (``logprobs``: the server gave the open rows logprobs, so each greedy row's every token
    is checked as its own top-1 and the divergence test needs no reference)."""
    if s.error is not None or s.cross_talk_from or s.hung_up:
        # An error, or another session's content, is a failure without one; a stream its
        # client hung up is not judged.
        return False
    if passed(s) is False or stopped_short(s, slack):
        return True
    sit = s.situation
    return not logprobs and sit is not None and sit.role in COMPARED_ROLES and not sit.sampled


def logprobs_given(answers: Sequence[SessionResult]) -> bool:
    """Whether the rows that asked for top logprobs got them (then a sampled greedy row shows
    by itself; without them the sampled-versus-control comparison needs references)."""
    asked = [s for s in answers if s.situation is not None and s.situation.role == "open"
             and s.error is None]
    return bool(asked) and all(s.top_logprobs for s in asked)


def _class(s: SessionResult) -> tuple[str, str]:
    api = s.situation.api if s.situation is not None else ""
    return api, s.workload


@dataclass
class Wanted:
    """What the judge asks the probe to send alone, cold, in one round."""

    sessions: set[int] = field(default_factory=set)
    sample: set[int] = field(default_factory=set)
    """The seeded sample's sessions (named in the verdict)."""
    skipped: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """Wrong answers of a class not sent alone: its first references all failed alone too."""


def sample(answers: Sequence[SessionResult], seed: int) -> set[int]:
    """The seeded sample: the burst's first ``SAMPLE_DECODE`` counting prompts (the serial
    throughput baseline), then one first send of each arm's mixed wave (so every step's mixed
    speedup has a serial time to scale), each from a shape not yet sampled while one is left,
    then one of each shape still missing."""
    rng = random.Random(f"references:{seed}")
    firsts = [
        s for s in answers
        if s.situation is not None and not s.situation.copy_index
        and (s.situation.turn or 1) == 1  # a later turn goes alone only behind its earlier ones
    ]
    decode = sorted(s.session for s in firsts if s.shape == "burst" and s.workload == "decode")
    chosen = set(decode[:SAMPLE_DECODE])
    # The burst's counting prompts are the throughput phase's, not the mixed wave's.
    mixed = [s for s in firsts if not (s.shape == "burst" and s.workload == "decode")]
    left = {s.shape for s in mixed}
    by_arm: dict[str, list[SessionResult]] = defaultdict(list)
    for s in mixed:
        by_arm[s.arm].append(s)
    for arm in sorted(by_arm):
        pool = [s for s in by_arm[arm] if s.shape in left] or by_arm[arm]
        pick = rng.choice(sorted(pool, key=lambda s: s.session))
        chosen.add(pick.session)
        left.discard(pick.shape)
    for shape in sorted(left):
        chosen.add(rng.choice(sorted(s.session for s in mixed if s.shape == shape)))
    return chosen


def wanted(answers: Sequence[SessionResult], refs: References, slack: int, seed: int) -> Wanted:
    """The first round: the sample, every compared greedy row, and up to ``PER_CLASS``
    wrong answers of each class (the second round, ``more``, asks for the rest)."""
    want = Wanted(sample=sample(answers, seed))
    want.sessions |= {s for s in want.sample if s not in refs}
    per_class: dict[tuple[str, str], list[int]] = defaultdict(list)
    logprobs = logprobs_given(answers)
    for s in answers:
        if s.session in refs or not needs_reference(s, slack, logprobs):
            continue
        if passed(s) is False or stopped_short(s, slack):
            per_class[_class(s)].append(s.session)
        else:
            want.sessions.add(s.session)
    for sessions in per_class.values():
        want.sessions |= set(sorted(set(sessions))[:PER_CLASS])
    return want


def more(answers: Sequence[SessionResult], refs: References, slack: int) -> Wanted:
    """The second round: the wrong answers still without a reference, in every class where a
    reference of the first round passed; the others are skipped (not judged)."""
    want = Wanted()
    open_: dict[tuple[str, str], list[int]] = defaultdict(list)
    for s in answers:
        if s.session not in refs and needs_reference(s, slack) and (
            passed(s) is False or stopped_short(s, slack)
        ):
            open_[_class(s)].append(s.session)
    # Only the references of wrong or short answers say whether the model can do what they
    # failed at; a sample's passing reference of the same kind says nothing of it.
    answered: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for s in answers:
        wrong = passed(s) is False or stopped_short(s, slack)
        if wrong and (s.session in refs.passed or s.session in refs.failed):
            answered[_class(s)].append(s.session in refs.passed)
    for cls, sessions in open_.items():
        if any(answered[cls]):
            want.sessions |= set(sessions)
        else:
            want.skipped[cls] = sorted(set(sessions))
    return want
