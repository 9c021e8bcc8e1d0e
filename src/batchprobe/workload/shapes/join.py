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
        "counting prompts of one length: half start together, each of the rest is sent once every "
        "running one has streamed 4, 8, 12, ... tokens (stream progress, so it joins on any speed)"
    )
    checks = "every request's count, token by token (the joiners' and the running ones')"
    needs_streaming = True

    def unavailable(self, ctx: ShapeContext) -> str | None:
        if ctx.sessions < 2:
            return "needs --sessions 2 or more (one to decode, one to join)"
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        joiners = ctx.sessions // 2
        # Long enough that the last joiner arrives well before the running ones end.
        max_tokens = max(min(ctx.max_tokens, 48), STEP * joiners + 16)
        sessions = ctx.take_sessions(ctx.sessions)
        items = [
            counting_item(
                run_id=ctx.run_id,
                session=session,
                start=count_start(rng, session),
                max_tokens=max_tokens,
                shape=self.name,
                api=ctx.api_for(index),
            )
            for index, session in enumerate(sessions)
        ]
        starters = items[: len(items) - joiners]
        running = tuple(i.session for i in starters)
        sends = [Send(i) for i in starters] + [
            Send(item, after=AfterTokens(running, STEP * (n + 1)))
            for n, item in enumerate(items[len(starters) :])
        ]
        return ShapePlan(self.name, items, sends)


SHAPE = Join()
