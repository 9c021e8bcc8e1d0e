"""Replaying a case: its requests sent as the wave sent them, and judged by the run's judge.

Each request goes out as the wave sent it (``send.replay``: its phase, its join trigger,
else its offset after the replay's start, so the ones that were in flight together are
again), over its own request path, with the prefix cache as the wave had it. The answers are scored against the case's planted needles and counts and judged
against the case's serial references with ``judge.judge.judge_arm``: the same function the
run's final pass calls, so "the failure came back" means what the verdict meant.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from batchprobe.client import OpenAIClient, Timeouts
from batchprobe.judge.judge import judge_arm
from batchprobe.judge.references import references
from batchprobe.judge.score import score
from batchprobe.repro.case import ReproCase, ReproRequest
from batchprobe.results.arms import ArmResult, ArmSpec
from batchprobe.results.findings import Finding
from batchprobe.results.items import WorkItem
from batchprobe.results.sessions import SessionResult
from batchprobe.send.arm import ArmContext
from batchprobe.send.replay import plans_for
from batchprobe.send.waves import run_mixed_wave
from batchprobe.workload.shapes import ShapePlan


@dataclass
class Replay:
    """One replay of some of a case's requests: its answers, and the findings on them."""

    arm: ArmResult
    findings: list[Finding]

    def shows(self, case: ReproCase) -> bool:
        """The kept failure came back: a hard finding of its kind on its session."""
        kept = case.kept
        return any(f.hard and f.kind is kept.kind and kept.session in f.sessions
                   for f in self.findings)

    def evidence(self, case: ReproCase) -> SessionResult | None:
        return next((s for s in self.arm.sessions if s.session == case.kept.session), None)


def reference_arm(case: ReproCase) -> ArmResult:
    """The case's serial references as the arm the judge reads them from."""
    return ArmResult(spec=ArmSpec(name="references", concurrency=1, role="reference"),
                     sessions=list(case.references), state="done")


def repro_spec(case: ReproCase) -> ArmSpec:
    """The arm a replay is: the failing wave's depth (a serial arm's requests ask for what
    its serial requests asked for)."""
    return ArmSpec(name="repro", concurrency=case.concurrency, depth=case.concurrency,
                   role="replay")


def send_context(case: ReproCase, plans: list[ShapePlan] | None = None,
                 record: Callable[[SessionResult, WorkItem, WorkItem], None] | None = None,
                 nonce: str | None = None) -> ArmContext:
    """The sending context of the run, as the case recorded it: the same bodies."""
    sending = case.sending
    return ArmContext(
        run_id=case.run_id, prompt_style=case.prompt_style, thresholds=case.thresholds,
        plans=plans or [], extra_body=dict(sending.extra_body), cache_body=dict(case.cache_body),
        logprobs=sending.logprobs, reference_logprobs=sending.reference_logprobs,
        request_seed=sending.request_seed, nonce=nonce,
        record=record or (lambda s, item, planned: None),
    )


async def replay(client: OpenAIClient, case: ReproCase, requests: list[ReproRequest],
                 nonce: bool = True) -> Replay:
    """Send ``requests`` once, as the wave did; judge what came back. ``nonce``: a fresh one
    in place of the run id in every prompt, so no replay's prefix cache serves the next (a
    re-send within the replay still shares its first copy's); off for a case whose failure
    lives in the cache (a conversation's later turn holds the earlier turn's answer as the
    run got it), which is replayed on a fresh launch instead."""
    arm = ArmResult(spec=repro_spec(case), state="running")

    def record(s: SessionResult, item: WorkItem, planned: WorkItem) -> None:
        score(s, item, case.planted)

    ctx = send_context(case, plans_for(requests), record, secrets.token_hex(4) if nonce else None)
    await run_mixed_wave(client, arm, ctx)
    arm.state = "done"
    found = judge_arm(arm, False, references([reference_arm(case)]), case.thresholds).findings
    return Replay(arm, found)


def client_for(case: ReproCase, base_url: str, model: str | None) -> OpenAIClient:
    """A client for the target, with the served model named (the case's by default)."""
    client = OpenAIClient(base_url, timeouts=Timeouts(total=120.0))
    client.model = model or case.target.model
    return client
