"""early: output lengths spanning 8x or more in one wave, so sequences leave while others go on."""

from __future__ import annotations

import math

from batchprobe.results.items import SamplingParams
from batchprobe.workload.decode import count_start, counting_item
from batchprobe.workload.shapes._types import Send, ShapeContext, ShapePlan

SPAN = 8
LONGEST = 64  # 8x needs no more; longer only costs decode time


def stop_after(first: int, tokens: float, tokens_per_number: float) -> str:
    """A stop string that cuts a count starting at ``first`` after about ``tokens`` tokens."""
    return f" {first + max(1, math.ceil(tokens / tokens_per_number))}"


class Early:
    name = "early"
    sends = (
        "counting prompts of one length sent together whose max_tokens span 8x or more; every "
        "third one ends on a stop string instead"
    )
    checks = (
        "every count token by token, so the survivors' text after each departure is checked; "
        "a stop string must stop the text"
    )
    needs_streaming = False

    def unavailable(self, ctx: ShapeContext) -> str | None:
        if ctx.sessions < 2:
            return "needs --sessions 2 or more (one to leave, one to go on)"
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        longest = max(min(ctx.max_tokens, LONGEST), SPAN * 2)
        shortest = max(longest // SPAN, 1)
        count = ctx.sessions
        ratio = (longest / shortest) ** (1 / (count - 1))
        targets = [round(shortest * ratio**k) for k in range(count)]
        items = []
        for index, session in enumerate(ctx.take_sessions(count)):
            start = count_start(rng, session)
            params, max_tokens = SamplingParams(), targets[index]
            if index % 3 == 1:
                # Ends on its stop string, with room to spare in max_tokens.
                stop = stop_after(start + 4, targets[index], ctx.tokens_per_number)
                params = SamplingParams(stop=[stop])
                max_tokens = targets[index] + math.ceil(2 * ctx.tokens_per_number)
            items.append(
                counting_item(
                    run_id=ctx.run_id,
                    session=session,
                    start=start,
                    max_tokens=max_tokens,
                    shape=self.name,
                    api=ctx.api_for(index),
                    params=params,
                )
            )
        notes = [f"max_tokens {min(targets)}..{max(targets)}"]
        return ShapePlan(self.name, items, [Send(i) for i in items], notes=notes)


SHAPE = Early()
