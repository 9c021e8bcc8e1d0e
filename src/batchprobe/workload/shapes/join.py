"""join: requests sent while others are decoding, triggered by stream progress (not time)."""

from __future__ import annotations

from batchprobe.workload.decode import count_start, counting_item
from batchprobe.workload.shapes._types import AfterTokens, Send, ShapeContext, ShapePlan

# The first joiner waits for this many streamed tokens of every running request; each
# further joiner for this many more, so joins land at several depths of the decode.
STEP = 4


class Join:
    name = "join"
    sends = (
        "counting prompts of one length: half start together, each of the rest (in a sweep step, "
        "up to half the depth) is sent once every running one has streamed 4, 8, 12, ... tokens "
        "(stream progress, so it joins on any speed)"
    )
    checks = "every request's count, token by token (the joiners' and the running ones')"
    needs_streaming = True

    def unavailable(self, ctx: ShapeContext) -> str | None:
        if ctx.sessions < 2:
            return "needs --sessions 2 or more (one to decode, one to join)"
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        starters = ctx.sessions - ctx.sessions // 2
        joiners = joiner_count(ctx)
        # Long enough that the last joiner arrives well before the running ones end.
        max_tokens = max(min(ctx.max_tokens, 48), STEP * joiners + 16)
        sessions = ctx.take_sessions(starters + joiners)
        items = [
            counting_item(
                run_id=ctx.run_id,
                session=session,
                start=count_start(rng, session),
                max_tokens=max_tokens,
                shape=self.name,
                api=ctx.api_for(index),
            ).model_copy(update={"role": "starter" if index < starters else "joiner"})
            for index, session in enumerate(sessions)
        ]
        running = tuple(i.session for i in items[:starters])
        sends = [Send(i) for i in items[:starters]] + [
            Send(item, after=AfterTokens(running, STEP * (n + 1)))
            for n, item in enumerate(items[starters:])
        ]
        return ShapePlan(self.name, items, sends)


def joiner_count(ctx: ShapeContext) -> int:
    """Half its sessions, and in a sweep step half the depth: joins at every depth."""
    return max(ctx.sessions // 2, (ctx.depth or 0) // 2, 1)


SHAPE = Join()
