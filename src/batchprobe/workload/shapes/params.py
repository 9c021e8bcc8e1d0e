"""params: greedy rows beside sampled, biased, stopped and penalised ones, in one wave, and
greedy control rows after them beside greedy traffic only."""

from __future__ import annotations

import math
from typing import Literal

from batchprobe.workload.decode import count_start, counting_item, open_item
from batchprobe.workload.items import SamplingParams, WorkItem
from batchprobe.workload.shapes._types import Send, ShapeContext, ShapePlan
from batchprobe.workload.shapes.early import stop_after

Role = Literal["greedy", "open", "control", "sampled", "bias", "stop", "penalty"]
# Every role at every size: each open row (greedy, open-ended, asking for top logprobs) sent
# next to a sampled one, and as many control rows (the same kind of prompt, greedy, sent in
# the second phase beside greedy traffic only) to compare their divergence from serial with.
# A wave of more sessions cycles through them again.
# Four of each kind of open row: without logprobs their divergence is all a sampled greedy
# row shows, and two against two can never reach the divergence test's p-value in one step.
ROLES: tuple[Role, ...] = (
    "open", "sampled", "greedy", "bias", "open", "sampled", "stop", "penalty", "open", "open",
    "control", "control", "control", "control",
)  # fmt: skip
BIAS = 100.0
MAX_TOKENS = 32
TOP_LOGPROBS = 5


def roles(sessions: int) -> list[Role]:
    """The role of each row: the whole set at least once, ``sessions`` rows when more."""
    return [ROLES[index % len(ROLES)] for index in range(max(sessions, len(ROLES)))]


class Params:
    name = "params"
    sends = (
        "counting and open-ended prompts sent together, each row with its own parameters: greedy "
        "counts, greedy open-ended rows asking for top logprobs beside sampled ones (temperature 1, "
        "top_p 0.95), a strong logit bias toward a token of its own, its own stop string, "
        "presence/frequency penalties; then greedy open-ended control rows beside greedy traffic"
    )
    checks = (
        "greedy and penalised rows follow their count; a greedy row's every token is its own "
        "top-1; a biased row emits its token every time; a stop string stops the text; a row "
        "showing another row's parameter names both sessions"
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
        items: list[WorkItem] = []
        for index, role in enumerate(roles(ctx.sessions)):
            (session,) = ctx.take_sessions(1)
            api = ctx.api_for(index)
            if role in ("open", "control"):
                item = open_item(
                    run_id=ctx.run_id,
                    session=session,
                    max_tokens=max_tokens,
                    shape=self.name,
                    api=api,
                    top_logprobs=TOP_LOGPROBS if role == "open" and ctx.top_logprobs else None,
                )
                items.append(item.model_copy(update={"role": role}))
                continue
            params, tokens = SamplingParams(), max_tokens
            start = count_start(rng, session)
            if role == "bias":
                token = next(biases, None)
                if token is None:
                    notes.append(
                        f"session {session}: no logit bias row (no single-token word known); "
                        "a greedy count instead"
                    )
                    role = "greedy"
                else:
                    params = SamplingParams(
                        logit_bias={str(token.token_id): BIAS}, bias_text=token.text
                    )
            elif role == "sampled":
                params = SamplingParams(temperature=1.0, top_p=0.95)
            elif role == "stop":
                # Stops on its last token, so it leaves the batch with the others (early's job
                # is rows leaving early, not this wave's).
                params = SamplingParams(
                    stop=[stop_after(start + 4, max_tokens, ctx.tokens_per_number)]
                )
                tokens = max_tokens + math.ceil(ctx.tokens_per_number)
            elif role == "penalty":
                params = SamplingParams(presence_penalty=0.1, frequency_penalty=0.01)
            item = counting_item(run_id=ctx.run_id, session=session, start=start,
                                 max_tokens=tokens, shape=self.name, api=api, params=params)  # fmt: skip
            items.append(item.model_copy(update={"role": role}))
        sends = [Send(i, phase=1 if i.role == "control" else 0) for i in items]
        return ShapePlan(self.name, items, sends, notes=notes)


SHAPE = Params()
