"""params: greedy rows beside sampled, biased, stopped and penalised ones, in one wave, and
greedy control rows after them beside greedy traffic only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from batchprobe.results.items import Api, Constraint, SamplingParams, WorkItem
from batchprobe.workload import constraints
from batchprobe.workload.constraints import CONSTRAINTS
from batchprobe.workload.decode import count_start, counting_item, open_item
from batchprobe.workload.shapes._types import Send, ShapeContext, ShapePlan
from batchprobe.workload.shapes.early import stop_after

Role = Literal[
    "greedy", "open", "control", "sampled", "choices", "bias", "stop", "penalty", "json_schema",
    "grammar",
]
# Every role at every size: each open row (greedy, open-ended, asking for top logprobs) sent
# next to a sampled one, and as many control rows (the same kind of prompt, greedy, sent in
# the second phase beside greedy traffic only) to compare their divergence from serial with.
# A wave of more sessions cycles through them again.
# Four of each kind of open row: without logprobs their divergence is all a sampled greedy
# row shows, and two against two can never reach the divergence test's p-value in one step.
# The bias, penalty and stop rows come just before the greedy row, in that order: sent a few
# at a time (a small N), a row beside them is a determined count (the stop row's, the greedy
# row's) that shows another row's parameter, and the stop row's second stop string is the
# greedy row's number (see ``aim_stops``). Where the server answers several choices in one
# request, the sampled rows ask for ``CHOICES`` and so does a greedy count row just after the
# first (``choices``): two such requests in one batch (vLLM PR #16863: their choices overrode
# each other's).
ROLES: tuple[Role, ...] = (
    "open", "sampled", "choices", "bias", "penalty", "json_schema", "grammar", "stop", "greedy",
    "open", "sampled", "open", "open", "control", "control", "control", "control",
)  # fmt: skip
# The greedy rows the divergence test compares (each row's text must come from the very
# prompt its wave sent: never a reference's nonce).
COMPARED_ROLES = frozenset({"open", "control"})
BIAS = 100.0
# Strong enough that a count run with them breaks within a few numbers on a tokenizer that
# splits digits (Gemma's, Llama's): each count repeats its space, comma and leading digits, and
# at 2 + 2 x repeats the repeated token falls behind tokens never seen (llama.cpp counts the
# prompt's numbers too, so at once). A neighbour's count broken that way is the mark of a
# leaked penalty; the penalty row's own text is therefore not a determined count.
PENALTY = 2.0
# The stop row's second stop string is this number of a greedy neighbour's count (its first
# generated number is 0): early in that count, never in the stop row's own (another block of
# 1,000), so a neighbour cut there, finish "stop", ran with the stop row's stop strings.
NEIGHBOUR_STOP_AT = 2
MAX_TOKENS = 32
TOP_LOGPROBS = 5
CHOICES = 2


# Where the server returns the open rows' top logprobs, each greedy row shows a sampled token
# by itself (its own top-1), and the divergence test's extra rows buy nothing: one of each
# role, and an open row after the stop row's aim (8 rows, not 14).
WITH_LOGPROBS: tuple[Role, ...] = (
    "open", "sampled", "choices", "bias", "penalty", "json_schema", "grammar", "stop", "greedy",
    "open", "control",
)  # fmt: skip


def roles(
    sessions: int, logprobs: bool = False, constraints: Sequence[str] = (), choices: bool = False
) -> list[Role]:
    """The role of each row: the whole set at least once, ``sessions`` rows when more
    (``logprobs``: the server returns top logprobs, so the smaller set; a constraint the
    server does not honour has no row, nor ``choices`` where it answers one choice only)."""
    cycle = [r for r in (WITH_LOGPROBS if logprobs else ROLES)
             if (r not in CONSTRAINTS or r in constraints) and (r != "choices" or choices)]
    return [cycle[index % len(cycle)] for index in range(max(sessions, len(cycle)))]


def aim_stops(items: list[WorkItem]) -> list[WorkItem]:
    """Each stop row with a second stop string: the number ``NEIGHBOUR_STOP_AT`` of the
    first greedy count after it in the wave (else the last before it), with its comma, so
    never a prefix of another number nor met in the stop row's own count (another block of
    1,000): it stops only where it planned, while that neighbour, run with its stop strings,
    is cut there with finish "stop"."""
    greedy = [i for i, item in enumerate(items) if item.role == "greedy" and item.count]
    aimed = list(items)
    for index, item in enumerate(items):
        if item.role != "stop" or not greedy or item.params.stop is None:
            continue
        target = next((g for g in greedy if g > index), greedy[-1])
        count = items[target].count
        if count is None:
            continue
        stop = [*item.params.stop, f" {count.first + NEIGHBOUR_STOP_AT},"]
        params = item.params.model_copy(update={"stop": stop})
        aimed[index] = item.model_copy(update={"params": params})
    return aimed


def _constrained(ctx: ShapeContext, session: int, kind: Constraint, api: Api) -> WorkItem:
    """A yes-or-no question under a JSON schema or a grammar: its answer checks itself."""
    return WorkItem(
        workload="decode",
        session=session,
        prompt=constraints.prompt(f"run {ctx.run_id} session {session}", api == "chat"),
        max_tokens=constraints.MAX_TOKENS,
        shape=NAME,
        api=api,
        params=SamplingParams(constraint=kind),
        role=kind,
    )


class Params:
    name = "params"
    sends = (
        "counting and open-ended prompts sent together, each row with its own parameters: greedy "
        "counts, greedy open-ended rows asking for top logprobs beside sampled ones (temperature 1, "
        "top_p 0.95), a strong logit bias toward a token of its own, its own stop strings (one "
        "where it must stop, one a number early in a greedy neighbour's count), strong "
        "presence/frequency penalties, a JSON schema or a grammar where the server honours them, "
        "two choices in one request (n=2: the sampled rows and a greedy count) where it answers "
        "them; then greedy open-ended control rows beside greedy traffic"
    )
    checks = (
        "greedy rows follow their count; a greedy row's every token is its own top-1; a biased "
        "row emits its token every time; a stop string stops the text; a row cut at another "
        "row's stop string, emitting another row's biased token, or whose count broke the way "
        "another row's penalties break one names both sessions; a constrained row's answer fits "
        "its constraint and no other row's answer does; each row asking for two choices gets "
        "indices 0 and 1, each ended, the greedy one's both its count, neither another's count"
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
        honoured = dict(ctx.constraints)
        several = CHOICES if ctx.choices else None
        planned = roles(ctx.sessions, ctx.logprobs_returned, list(honoured), ctx.choices)
        for index, role in enumerate(planned):
            (session,) = ctx.take_sessions(1)
            api = ctx.api_for(index)
            if role == "json_schema" or role == "grammar":
                items.append(_constrained(ctx, session, role, honoured[role]))
                continue
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
                params = SamplingParams(temperature=1.0, top_p=0.95, n=several)
            elif role == "choices":
                params = SamplingParams(n=CHOICES)
            elif role == "stop":
                # Stops on its last token, so it leaves the batch with the others (early's job
                # is rows leaving early, not this wave's).
                params = SamplingParams(
                    stop=[stop_after(start + 4, max_tokens, ctx.tokens_per_number)]
                )
                tokens = max_tokens + math.ceil(ctx.tokens_per_number)
            elif role == "penalty":
                params = SamplingParams(presence_penalty=PENALTY, frequency_penalty=PENALTY)
            item = counting_item(run_id=ctx.run_id, session=session, start=start,
                                 max_tokens=tokens, shape=self.name, api=api, params=params)  # fmt: skip
            items.append(item.model_copy(update={"role": role}))
        items = aim_stops(items)
        sends = [Send(i, phase=1 if i.role == "control" else 0) for i in items]
        return ShapePlan(self.name, items, sends, notes=notes)


NAME = "params"
SHAPE = Params()
