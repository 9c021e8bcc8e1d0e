"""repeat: the same prompt twice in flight, shared long prefixes, prompts re-sent after they ended.

The one wave sent with the server's prefix cache as users run it; judged against the cold serial
references, with the cached tokens the server reported recorded per request.
"""

from __future__ import annotations

import random

from batchprobe.results.items import WorkItem
from batchprobe.workload.haystack import filler_lines
from batchprobe.workload.needle import needle_line
from batchprobe.workload.recall import ending, recall_item
from batchprobe.workload.shapes._types import (
    AfterFinish,
    AfterTokens,
    Send,
    ShapeContext,
    ShapePlan,
)

TWINS = 2
FAMILY = 3
# Sweep steps this deep or shallower send one twin pair and a family of two.
SHALLOW = 8
# Re-sent while they decode and after they ended, one over each request path: a server may
# cache what a prompt left behind on one path only (mlx-lm checkpoints chat prompts only).
RESENT = 2
SHARED = 0.88  # of the haystack, ahead of each family member's own suffix (contract: >= 80%)


def _family(ctx: ShapeContext, rng: random.Random, sessions: list[int], tokens: int) -> list[WorkItem]:
    """Prompts equal up to a long shared prefix; each one's needle is in its own suffix."""
    chars = int(tokens * ctx.chars_per_token)
    shared = "\n".join(filler_lines(rng, int(chars * SHARED)))
    head = f"[run {ctx.run_id} shared prefix {sessions[0]}] Server log excerpt:\n{shared}\n"
    items = []
    for session, code in zip(sessions, ctx.new_codes(rng, len(sessions))):
        tail = filler_lines(rng, int(chars * (1 - SHARED)))
        tail.insert(len(tail) // 2, needle_line(code))
        suffix = f"[session {session}]\n" + "\n".join(tail)
        items.append(
            WorkItem(
                workload="recall",
                session=session,
                prompt=head + suffix + ending(ctx.prompt_style == "chat"),
                max_tokens=2 * ctx.recall_max_tokens,
                shape="repeat",
                api=ctx.default_api,
                expected_code=code,
                depth=SHARED,
            )
        )
    return items


class Repeat:
    name = "repeat"
    sends = (
        "recall prompts with the prefix cache on: two items each sent twice at once, three "
        "sharing an 88% prefix (needle in the suffix), two (one per request path; a sweep step "
        "one, its path taking turns from step to step) re-sent while each decodes and again as "
        "soon as it finished, while the others are still in flight"
    )
    checks = (
        "every copy finds its own needle (another session's = cross-talk) against the cold serial "
        "reference; cached prompt tokens recorded per request"
    )
    needs_streaming = False

    def unavailable(self, ctx: ShapeContext) -> str | None:
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        tokens = max(ctx.haystack_tokens // 3, 64)
        # A shallow sweep step (few in flight) keeps every role with fewer of each: the wave
        # goes through its slots in fewer rounds.
        shallow = ctx.depth is not None and ctx.depth <= SHALLOW
        twin_count, family_count = (1, 2) if shallow else (TWINS, FAMILY)
        twin_sessions = ctx.take_sessions(twin_count)
        family = _family(ctx, rng, ctx.take_sessions(family_count), tokens)
        # A sweep step re-sends one, its path taking turns from step to step.
        resent = ctx.take_sessions(RESENT if ctx.depth is None else 1)
        singles = []
        # One item over the other request path, the second re-sent one (sent second, so its
        # prefill has company): one per shape, so a model that does recall over one path only
        # (a base model over chat) keeps its serial recall.
        apis = [ctx.api_for(0)] * (twin_count + 1) + [ctx.api_for(1)]
        if ctx.depth is not None:
            apis = [ctx.api_for(0)] * twin_count + [ctx.step_path()]
        for api, session, code in zip(
            apis, [*twin_sessions, *resent], ctx.new_codes(rng, twin_count + len(resent))
        ):
            singles.append(
                recall_item(
                    run_id=ctx.run_id,
                    session=session,
                    code=code,
                    rng=rng,
                    haystack_tokens=tokens,
                    chat=api == "chat",
                    # A re-sent one ends first, so the others are still in flight when it returns.
                    max_tokens=ctx.recall_max_tokens if session in resent else 2 * ctx.recall_max_tokens,
                    chars_per_token=ctx.chars_per_token,
                    shape=self.name,
                    api=api,
                )
            )
        twins, again = singles[:twin_count], singles[twin_count:]
        # The re-sent ones go second, behind one twin, so each is prefilled beside other
        # prompts and not last: a server that stores what a batched prefill left behind under
        # the wrong row (mlx-lm 0.31.0 gave every row the last row's KV) then answers the
        # re-send from another prompt. (Sent first, mlx-lm prefilled them alone: it starts the
        # first arrival at once and batches the ones that came meanwhile.)
        pairs = [Send(t, copy_index=c) for t in twins for c in (0, 1)]
        sends = [pairs[0], *(Send(a) for a in again), *pairs[1:], *(Send(f) for f in family)]
        for a in again:
            # Again while it decodes (only what its prefill stored can serve it), then again
            # once it ended (what the whole answer left behind).
            sends.append(Send(a, copy_index=1, after=AfterTokens((a.session,), 1)))
            sends.append(Send(a, copy_index=2, after=AfterFinish(a.session)))
        return ShapePlan(self.name, [*twins, *family, *again], sends, prefix_cache=True)


SHAPE = Repeat()
