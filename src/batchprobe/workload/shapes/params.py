"""params: greedy rows beside sampled, biased, stopped and penalised ones, in one wave."""

from __future__ import annotations

import math
from typing import Literal

from batchprobe.workload.decode import count_start, counting_item
from batchprobe.workload.items import SamplingParams
from batchprobe.workload.shapes._types import Send, ShapeContext, ShapePlan
from batchprobe.workload.shapes.early import stop_after

Role = Literal["greedy", "sampled", "bias", "stop", "penalty"]
# The order rows are given roles in; a wave of N sessions takes the first N (cycled).
ROLES: tuple[Role, ...] = ("greedy", "sampled", "bias", "stop", "greedy", "bias", "stop", "penalty")
BIAS = 100.0
MAX_TOKENS = 32


class Params:
    name = "params"
    sends = (
        "counting prompts of one length sent together, each row with its own parameters: greedy, "
        "sampled (temperature 1, top_p 0.95), a strong logit bias toward a token of its own, its "
        "own stop string, presence/frequency penalties"
    )
    checks = (
        "greedy and penalised rows follow their count; a biased row emits its token every time; "
        "a stop string stops the text; a row showing another row's parameter names both sessions"
    )
    needs_streaming = False

    def unavailable(self, ctx: ShapeContext) -> str | None:
        if ctx.sessions < 2:
            return "needs --sessions 2 or more (parameters must differ in one batch)"
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        max_tokens = min(ctx.max_tokens, MAX_TOKENS)
        biases = iter(ctx.bias_tokens)
        notes: list[str] = []
        items = []
        for index, session in enumerate(ctx.take_sessions(ctx.sessions)):
            role = ROLES[index % len(ROLES)]
            start = count_start(rng, session)
            params, tokens = SamplingParams(), max_tokens
            if role == "sampled":
                params = SamplingParams(temperature=1.0, top_p=0.95)
            elif role == "bias":
                token = next(biases, None)
                if token is None:
                    notes.append(f"session {session}: no logit bias (no single-token word from /tokenize)")
                else:
                    params = SamplingParams(
                        logit_bias={str(token.token_id): BIAS}, bias_text=token.text
                    )
            elif role == "stop":
                # Stops on its last token, so it leaves the batch with the others (early's job
                # is rows leaving early, not this wave's).
                params = SamplingParams(
                    stop=[stop_after(start + 4, max_tokens, ctx.tokens_per_number)]
                )
                tokens = max_tokens + math.ceil(ctx.tokens_per_number)
            elif role == "penalty":
                params = SamplingParams(presence_penalty=0.1, frequency_penalty=0.01)
            items.append(
                counting_item(
                    run_id=ctx.run_id,
                    session=session,
                    start=start,
                    max_tokens=tokens,
                    shape=self.name,
                    api=ctx.api_for(index),
                    params=params,
                )
            )
        return ShapePlan(self.name, items, [Send(i) for i in items], notes=notes)


SHAPE = Params()
