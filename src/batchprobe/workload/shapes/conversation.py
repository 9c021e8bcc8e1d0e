"""conversation: sessions that continue their own earlier turns, with the prefix cache on.

Each later turn's prompt is the turn before as sent, its answer as generated in the same arm,
and a new message (built at send time: ``workload.conversation``). Every turn asks for a code
only its own conversation holds, and no two turns ask for the same one:

- turn 1 plants DOOR_CODE and VAULT_CODE in its log and asks for DOOR_CODE;
- turn 2 plants GATE_CODE in more of the log and asks for VAULT_CODE (planted in turn 1);
- turn 3 adds a few lines and asks for GATE_CODE (planted in turn 2);
- then turn 1 is sent again, after its conversation grew to turn 3.

Each turn is its own session with its own expected code, so a cache that serves another
conversation's KV, or another turn's (the grown conversation's, to the re-sent turn 1), shows
as cross-talk naming that turn's session. A count continued over turns (completions: each
prompt exactly the one before plus its whole completion) must keep counting.

Turns of one depth go out together, one phase per depth, so every conversation's turn 1 is
cached when the turns 2 arrive; the count's turns follow in their own phases.
"""

from __future__ import annotations

import random

from batchprobe.results.items import Api, Turn, WorkItem
from batchprobe.workload.decode import count_start, counting_item
from batchprobe.workload.haystack import filler_lines
from batchprobe.workload.needle import needle_line
from batchprobe.workload.recall import ending
from batchprobe.workload.shapes._types import Send, ShapeContext, ShapePlan

KEYS = ("DOOR_CODE", "VAULT_CODE", "GATE_CODE")
RECALL_CONVERSATIONS = 2
# Each turn's new log lines, as a fraction of --haystack-tokens.
PARTS = (1 / 6, 1 / 6, 1 / 12)
# Which keys each turn plants, and which one it asks for.
PLANTS: tuple[tuple[str, ...], ...] = (KEYS[:2], KEYS[2:], ())
ASKS = (KEYS[0], KEYS[1], KEYS[2])
COUNT_TURNS = 3
COUNT_MAX_TOKENS = 32
_OPENINGS = ("Server log excerpt:", "More of the same server log:", "The last lines of the log:")


def _message(ctx: ShapeContext, rng: random.Random, turn: int, codes: dict[str, str], chat: bool) -> str:
    """Turn ``turn``'s new message: log lines with its keys planted, then its question."""
    lines = filler_lines(rng, int(ctx.haystack_tokens * PARTS[turn] * ctx.chars_per_token))
    for key in PLANTS[turn]:
        lines.insert(int(len(lines) * rng.uniform(0.1, 0.9)), needle_line(codes[key], key))
    lead = "" if chat or turn == 0 else "\n\n"
    return lead + _OPENINGS[turn] + "\n" + "\n".join(lines) + ending(chat, ASKS[turn])


def recall_conversation(
    ctx: ShapeContext, rng: random.Random, api: Api, shape: str = "conversation"
) -> list[WorkItem]:
    """Three turns (each continuing the one before) of a new conversation on ``api``."""
    sessions = ctx.take_sessions(len(ASKS))
    codes = dict(zip(KEYS, ctx.new_codes(rng, len(KEYS))))
    chat = api == "chat"
    turns = []
    for index, session in enumerate(sessions):
        head = f"[run {ctx.run_id} conversation {sessions[0]}] " if index == 0 else ""
        turns.append(
            WorkItem(
                workload="recall",
                session=session,
                prompt=head + _message(ctx, rng, index, codes, chat),
                max_tokens=ctx.recall_max_tokens,
                shape=shape,
                api=api,
                expected_code=codes[ASKS[index]],
                turn=Turn(
                    conversation=sessions[0],
                    index=index + 1,
                    continues=sessions[index - 1] if index else None,
                ),
            )
        )
    return turns


def _count_conversation(ctx: ShapeContext, rng: random.Random) -> list[WorkItem]:
    """A count over the completions path; each later turn's message is empty, so its prompt
    is exactly the turn before plus its whole completion."""
    sessions = ctx.take_sessions(COUNT_TURNS)
    first = counting_item(
        run_id=ctx.run_id,
        session=sessions[0],
        start=count_start(rng, sessions[0]),
        max_tokens=min(ctx.max_tokens, COUNT_MAX_TOKENS),
        shape="conversation",
        api="completions",
    )
    turns = [first.model_copy(update={"turn": Turn(conversation=sessions[0], index=1)})]
    for index, session in enumerate(sessions[1:], start=2):
        turn = Turn(conversation=sessions[0], index=index, continues=session - 1)
        turns.append(first.model_copy(update={"session": session, "prompt": "", "turn": turn}))
    return turns


class Conversation:
    name = "conversation"
    sends = (
        "two recall conversations of three turns (one per request path; a sweep step has one, "
        "its path taking turns from step to step), each turn the one before plus its answer "
        "plus new log lines and a question, turn 1 re-sent once turn 3 is done; a count "
        "continued over three completions turns; prefix cache on"
    )
    checks = (
        "every turn finds the code it asks for (planted in an earlier turn; another turn's or "
        "another conversation's = cross-talk, named); the count keeps counting across turns"
    )
    needs_streaming = False

    def unavailable(self, ctx: ShapeContext) -> str | None:
        if ctx.sessions < 2:
            return "needs --sessions 2 or more (conversations run side by side)"
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        items: list[WorkItem] = []
        sends: list[Send] = []
        # A sweep step has one, over the request paths in turn from step to step.
        paths = ([ctx.api_for(index) for index in range(RECALL_CONVERSATIONS)]
                 if ctx.depth is None else [ctx.step_path()])
        for api in paths:
            turns = recall_conversation(ctx, rng, api)
            items += turns
            sends += [Send(t, phase=n) for n, t in enumerate(turns)]
            sends.append(Send(turns[0], copy_index=1, phase=len(turns)))
        notes = [f"turn 1 of each conversation re-sent once its turn {len(ASKS)} ended"]
        if "completions" in (ctx.api_for(0), ctx.api_for(1)):
            count = _count_conversation(ctx, rng)
            items += count
            sends += [Send(t, phase=len(ASKS) + 1 + n) for n, t in enumerate(count)]
        else:
            notes.append("no count continuation (the completions path is not used here)")
        return ShapePlan(self.name, items, sends, prefix_cache=True, notes=notes)


SHAPE = Conversation()
