"""burst: today's wave. Every recall item at once, then every decode item at once."""

from __future__ import annotations

from batchprobe.workload.decode import build_decode_items
from batchprobe.workload.recall import recall_item
from batchprobe.workload.shapes._types import Send, ShapeContext, ShapePlan


class Burst:
    name = "burst"
    sends = (
        "N recall prompts of --haystack-tokens together, then N counting prompts of --max-tokens "
        "together (the throughput figures come from this wave)"
    )
    checks = "own needle (another session's = cross-talk), the count followed token by token"
    needs_streaming = False

    def unavailable(self, ctx: ShapeContext) -> str | None:
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        recall_sessions = ctx.take_sessions(ctx.sessions)
        codes = ctx.new_codes(rng, ctx.sessions)
        recall = [
            recall_item(
                run_id=ctx.run_id,
                session=session,
                code=code,
                rng=rng,
                haystack_tokens=ctx.haystack_tokens,
                chat=ctx.prompt_style == "chat",
                max_tokens=ctx.recall_max_tokens,
                chars_per_token=ctx.chars_per_token,
            )
            for session, code in zip(recall_sessions, codes)
        ]
        decode = build_decode_items(
            run_id=ctx.run_id,
            sessions=ctx.sessions,
            max_tokens=ctx.max_tokens,
            prompt_style=ctx.prompt_style,
            seed=ctx.seed,
            first_session=ctx.take_sessions(ctx.sessions)[0],
        )
        sends = [Send(i, phase=0) for i in recall] + [Send(i, phase=1) for i in decode]
        return ShapePlan(self.name, recall + decode, sends)


SHAPE = Burst()
