"""aborts: clients that hang up mid-stream, and what the server sends the next requests.

Each group is one dropped stream and the requests around it:

- a counting prompt whose client hangs up after its first content chunk, once a long recall
  prompt of the same wave has gone out (so the drop reaches the server while that one is in
  prefill, or queued: the situation records who still waited for a first token);
- that long recall prompt (sent once the counting prompt has streamed its first chunk);
- the dropped prompt sent again (the retry) and a fresh session's counting prompt, 0, 30 or
  60 ms after the hang-up.

And one conversation: turn 1, then turn 2 dropped after its first chunk, then the next turn,
which continues turn 1 (the dropped exchange discarded, as a chat client does) and asks for a
code turn 1 planted. The prefix cache is on, as users run it: a retry finds its own prompt
cached, the next turn its conversation's.

The dropped streams are not judged (their answers are cut by the client); the retries, the
neighbours and the next turn are, like any other answer, and content of a dropped stream in
one of them is cross-talk that names it.
"""

from __future__ import annotations

from batchprobe.results.items import Turn, WorkItem
from batchprobe.workload.decode import count_start, counting_item
from batchprobe.workload.recall import ending, recall_item
from batchprobe.workload.shapes._types import (
    AfterFinish,
    AfterTokens,
    HangUp,
    Send,
    ShapeContext,
    ShapePlan,
)
from batchprobe.workload.shapes.conversation import KEYS, recall_conversation

# How long after a hang-up its retry and the fresh session go out, by group (the first just
# after the server can have seen the connection close).
RETRY_DELAYS_S = (0.005, 0.03, 0.06)
# One dropped stream per this many of the shape's size (at least one).
PER_DROP = 3


def _group(ctx: ShapeContext, index: int) -> tuple[list[WorkItem], list[Send]]:
    rng = ctx.rng(f"{NAME}:{index}")
    dropped, prefill, fresh = ctx.take_sessions(3)
    api = ctx.default_api

    def count(session: int, role: str) -> WorkItem:
        item = counting_item(run_id=ctx.run_id, session=session, start=count_start(rng, session),
                             max_tokens=ctx.max_tokens, shape=NAME, api=api)
        return item.model_copy(update={"role": role})

    retried, neighbour = count(dropped, "retried"), count(fresh, "fresh")
    long = recall_item(
        run_id=ctx.run_id, session=prefill, code=ctx.new_codes(rng, 1)[0], rng=rng,
        haystack_tokens=ctx.haystack_tokens, chat=api == "chat",
        max_tokens=ctx.recall_max_tokens, chars_per_token=ctx.chars_per_token, shape=NAME,
        api=api,
    ).model_copy(update={"role": "prefill"})
    delay = RETRY_DELAYS_S[index % len(RETRY_DELAYS_S)]
    sends = [
        Send(retried, hang_up=HangUp(tokens=1, beside=prefill, latest=max(2, ctx.max_tokens // 4))),
        Send(long, after=AfterTokens((dropped,), 1)),
        Send(retried, copy_index=1, after=AfterFinish(dropped), delay_s=delay),
        Send(neighbour, after=AfterFinish(dropped), delay_s=delay),
    ]
    return [retried, long, neighbour], sends


def _conversation(ctx: ShapeContext) -> tuple[list[WorkItem], list[Send]]:
    """Turn 1, turn 2 dropped after its first chunk, and the next turn after turn 1."""
    rng = ctx.rng(f"{NAME}:conversation")
    first, second, _ = recall_conversation(ctx, rng, ctx.default_api, shape=NAME)
    (session,) = ctx.take_sessions(1)
    chat = ctx.default_api == "chat"
    lead = "" if chat else "\n\n"
    following = WorkItem(
        workload="recall",
        session=session,
        prompt=f"{lead}Never mind that question; here is another." + ending(chat, KEYS[1]),
        max_tokens=ctx.recall_max_tokens,
        shape=NAME,
        api=ctx.default_api,
        expected_code=second.expected_code,
        role="next-turn",
        turn=Turn(conversation=first.session, index=2, continues=first.session),
    )
    first = first.model_copy(update={"role": "turn-1"})
    second = second.model_copy(update={"role": "dropped-turn"})
    sends = [
        Send(first),
        Send(second, phase=1, hang_up=HangUp(tokens=1)),
        Send(following, phase=1, after=AfterFinish(second.session)),
    ]
    return [first, second, following], sends


class Aborts:
    name = "aborts"
    sends = (
        "counting prompts whose client hangs up after the first chunk while a long prompt of "
        "the wave is in prefill, each re-sent (the retry) with a fresh session 0-60 ms later; "
        "a conversation whose turn 2 is dropped, then its next turn; prefix cache on"
    )
    checks = (
        "the retries, the fresh sessions, the long prompts and the next turn, each against "
        "its own count or needle (a dropped stream's content = cross-talk, named); the server "
        "still serves after the drops; dropped requests stop running"
    )
    needs_streaming = True

    def unavailable(self, ctx: ShapeContext) -> str | None:
        if ctx.sessions < 2:
            return "needs --sessions 2 or more (a dropped stream needs neighbours)"
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        items: list[WorkItem] = []
        sends: list[Send] = []
        for index in range(max(1, ctx.sessions // PER_DROP)):
            group_items, group_sends = _group(ctx, index)
            items += group_items
            sends += group_sends
        turn_items, turn_sends = _conversation(ctx)
        notes = [
            ("the client hangs up each dropped stream after its first chunk; its retry and a "
             "fresh session follow 5, 30 or 60 ms later"),
            ("the conversation's turn 2 is dropped after its first chunk; the next turn "
             "continues turn 1"),
        ]
        return ShapePlan(NAME, items + turn_items, sends + turn_sends, prefix_cache=True,
                         notes=notes)


NAME = "aborts"
SHAPE = Aborts()
