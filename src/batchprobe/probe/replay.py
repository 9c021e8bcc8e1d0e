"""Replays: a wrong answer with only its own content is sent again in its whole wave.

The situation is replayed, not only the request: the same wave (an arm's shape, or a sweep
step's mixed wave) at the same depth, so a re-send comes after its first copy again and a
joiner joins the same kind of batch. Each replay's requests go into ``arm.replays``; the
judge then reads them: wrong again in any replay is a failure, right in every one a flip.
When flips remain, a sample of serial references is sent alone again (``serial_replays``):
the rate flips are held against.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from batchprobe.client import OpenAIClient
from batchprobe.judge.judge import replay_candidates, wrong_again
from batchprobe.judge.references import references
from batchprobe.results.arms import ArmResult, ArmSpec
from batchprobe.results.thresholds import Thresholds
from batchprobe.send.arm import ArmContext
from batchprobe.send.waves import run_mixed_wave, run_waves
from batchprobe.workload.shapes import ShapePlan

# Serial references sent alone again when flips remain (per arm).
SERIAL_SAMPLE = 8


def _quiet(ctx: ArmContext, plans: list[ShapePlan]) -> ArmContext:
    return dataclasses.replace(ctx, plans=plans, on_session=lambda arm, s: None)


async def replay_wrong(
    client: OpenAIClient,
    arm: ArmResult,
    ctx: ArmContext,
    arms: Sequence[ArmResult],
    t: Thresholds,
    waves: Sequence[Sequence[ShapePlan]],
    mixed: bool,
) -> None:
    """Replay the waves (each a list of plans sent as the arm sent them: ``mixed``, all at
    once as a sweep step's; else one shape after another) that hold ``arm``'s wrong answers,
    up to ``t.replays`` times (fewer once every one has gone wrong again), then sample the
    serial rate if flips remain."""
    wanted = set(replay_candidates(arm, arms, t))
    if not wanted:
        return
    holding = [list(w) for w in waves if any(wanted & set(p.sessions) for p in w)]
    if not mixed:
        holding = [[p for p in w if wanted & set(p.sessions)] for w in holding]
    refs = references(arms)
    run = run_mixed_wave if mixed else run_waves
    for k in range(1, t.replays + 1):
        spec = arm.spec.model_copy(update={"name": f"{arm.spec.name}~replay{k}"})
        again = ArmResult(spec=spec, state="running")
        for plans in holding:
            await run(client, again, _quiet(ctx, plans))
        arm.replays += [s for s in again.sessions if s.session in wanted]
        failed = {
            s.session for s in arm.replays
            if s.session in refs.passed and wrong_again(s, refs.passed[s.session], t)
        }
        if failed >= wanted:
            return
    flipped = [p for w in holding for p in w if wanted & set(p.sessions)]
    await _serial_sample(client, arm, ctx, flipped)


async def _serial_sample(
    client: OpenAIClient, arm: ArmResult, ctx: ArmContext, plans: list[ShapePlan]
) -> None:
    items = [i for p in plans for i in p.items][:SERIAL_SAMPLE]
    keep = {i.session for i in items}
    sample = [
        dataclasses.replace(p, items=[i for i in p.items if i.session in keep], sends=[])
        for p in plans
    ]
    spec = ArmSpec(name=f"{arm.spec.name}~serial", concurrency=1, mode=arm.spec.mode)
    alone = ArmResult(spec=spec, state="running")
    await run_waves(client, alone, _quiet(ctx, [p for p in sample if p.items]))
    arm.serial_replays += alone.sessions
