"""Findings: the one place a judgement is recorded.

``probe.judge`` makes them, once; the verdict (``correct`` and its reasons), the envelope's
per-step ``correct``, JUnit, ``compare --gate``, HTML, markdown and the console only render
them. A finding names where it happened (arm, sweep step, shape), what broke (``kind``), whose
answers (``sessions``), whose content showed up in them (``sources``) and the evidence.

``severity``: ``hard`` makes the run incorrect; ``soft`` is reported and named in the reasons
but tolerated (a numerics flip, greedy divergence on an engine that is not batch-invariant);
``info`` says what could not be judged and why (a path or parameter the server does not serve).

``Judged`` counts, per arm, shape and check, how many answers that check judged: a check with
no finding and a judged count above 0 passed; one with a count of 0 was not judged.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.client.types import ErrorKind


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class FindingKind(str, Enum):
    """What broke. Each kind belongs to one :data:`CHECK_OF` check (a JUnit test case)."""

    ERROR = "error"  # HTTP error, finish_reason "error", timeout, cut stream (error_kind says)
    CROSS_TALK = "cross_talk"  # another session's needle, count, words or turn in this answer
    RECALL_MISS = "recall_miss"  # missed its own needle where its serial reference found it
    COUNT_BROKE = "count_broke"  # the count stopped following its own numbers (or is empty)
    ENDED_EARLY = "ended_early"  # shorter than its reference, with no reason of its own to stop
    BIAS = "bias"  # its logit bias was not honoured
    CONSTRAINT = "constraint"  # its JSON schema or grammar not honoured, or another row's applied
    STOP = "stop"  # its stop string was not honoured
    CHOICES = "choices"  # asked for n choices: one missing, doubled or ended without a reason
    USAGE = "usage"  # usage disagrees with the stream, or with the reference's prompt tokens
    STREAM = "stream"  # the stream lost pieces: its reference's text with gaps, or usage beyond it
    SAMPLED = "sampled"  # a greedy row's chosen token was not its own top-1: it was sampled
    SAMPLED_DIVERGENCE = "sampled_divergence"  # greedy rows beside sampled ones diverge far more
    FLIP = "flip"  # a wrong answer with only its own content that did not come back on replay
    FLIP_RATE = "flip_rate"  # flips far above the serial baseline's own rate
    GREEDY_DIVERGENCE = "greedy_divergence"  # greedy output differs from the serial run
    WARM_UP = "warm_up"  # the warm-up request failed
    SERVER_DEAD = "server_dead"  # no 1-token generation after the arm or step
    NOT_RUN = "not_run"  # a planned arm or step that did not complete
    UNSUPPORTED = "unsupported"  # the server refused a path or parameter in the serial reference
    NOT_JUDGED = "not_judged"  # the serial reference failed its own check
    THROUGHPUT_DROP = "throughput_drop"  # the server's history: slower after the mixed waves
    ABORT_IGNORED = "abort_ignored"  # a request its client dropped went on running
    KV_POOL = "kv_pool"  # requests that fit alone failed once the KV pool filled, or one hung


Severity = Literal["hard", "soft", "info"]

CheckName = Literal[
    "completed",
    "warm_up",
    "server_alive",
    "errors",
    "cross_talk",
    "recall",
    "count",
    "length",
    "bias",
    "stop",
    "constraint",
    "choices",
    "usage",
    "stream",
    "greedy",
    "flips",
    "supported",
    "throughput",
    "aborts",
    "kv_pool",
]

# The check (test case) each kind of finding fails.
CHECK_OF: dict[FindingKind, CheckName] = {
    FindingKind.ERROR: "errors",
    FindingKind.CROSS_TALK: "cross_talk",
    FindingKind.RECALL_MISS: "recall",
    FindingKind.COUNT_BROKE: "count",
    FindingKind.ENDED_EARLY: "length",
    FindingKind.BIAS: "bias",
    FindingKind.STOP: "stop",
    FindingKind.CONSTRAINT: "constraint",
    FindingKind.CHOICES: "choices",
    FindingKind.USAGE: "usage",
    FindingKind.STREAM: "stream",
    FindingKind.SAMPLED: "greedy",
    FindingKind.SAMPLED_DIVERGENCE: "greedy",
    FindingKind.GREEDY_DIVERGENCE: "greedy",
    FindingKind.FLIP: "flips",
    FindingKind.FLIP_RATE: "flips",
    FindingKind.WARM_UP: "warm_up",
    FindingKind.SERVER_DEAD: "server_alive",
    FindingKind.NOT_RUN: "completed",
    FindingKind.UNSUPPORTED: "supported",
    FindingKind.NOT_JUDGED: "supported",
    FindingKind.THROUGHPUT_DROP: "throughput",
    FindingKind.ABORT_IGNORED: "aborts",
    FindingKind.KV_POOL: "kv_pool",
}


class Finding(_Model):
    """One judgement about one or more answers of one arm (or sweep step) and shape."""

    arm: str = Field(description="The arm or sweep step (sweep@N) it is about.")
    step: int | None = Field(default=None, description="The sweep step's depth; None for an arm.")
    shape: str | None = Field(default=None, description="None: about the arm itself.")
    kind: FindingKind
    severity: Severity = "hard"
    sessions: list[int] = Field(default_factory=list, description="The answers it is about.")
    copy_index: int = Field(default=0, description="Which sending of the item (repeat: 1, 2, ...).")
    sources: list[int] = Field(
        default_factory=list, description="Sessions whose content showed up in those answers."
    )
    error_kind: ErrorKind | None = Field(default=None, description="kind error: which error.")
    evidence: str = Field(default="", description="What was expected and what came, short.")
    message: str = Field(description="The reason line, naming sessions and their situation.")
    replays: int | None = Field(default=None, description="How often the answer was replayed.")
    replays_failed: int | None = Field(default=None, description="How many replays failed again.")

    @property
    def check(self) -> CheckName:
        return CHECK_OF[self.kind]

    @property
    def hard(self) -> bool:
        return self.severity == "hard"


class Judged(_Model):
    """How many answers one check judged in one arm and shape (0: not judged there)."""

    arm: str
    step: int | None = None
    shape: str | None = None
    check: CheckName
    judged: int = Field(ge=0)


def hard(findings: list[Finding], arm: str | None = None) -> list[Finding]:
    """The hard findings (of ``arm`` when given)."""
    return [f for f in findings if f.hard and (arm is None or f.arm == arm)]
