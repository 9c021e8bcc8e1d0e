"""ragged: recall prompts whose lengths span 8x or more in one wave, across the sliding window."""

from __future__ import annotations

from batchprobe.workload.recall import recall_item
from batchprobe.workload.shapes._types import Send, ShapeContext, ShapePlan

SPAN = 8.0
# Header, question and needle around the filler, in tokens: the span is of whole prompts.
OVERHEAD_TOKENS = 40
MIN_FILLER_TOKENS = 16
# Enough rows to fill a batch with lengths between the extremes; more only cost prefill.
MAX_ROWS = 6
# At every size: the extremes and lengths between them.
MIN_ROWS = 4


def lengths(ctx: ShapeContext, count: int) -> tuple[list[int], list[str]]:
    """Filler token targets, shortest to longest, and notes on how the window was met."""
    notes: list[str] = []
    low = max(ctx.haystack_tokens // 10, MIN_FILLER_TOKENS)
    high = max(ctx.haystack_tokens, int(SPAN * (low + OVERHEAD_TOKENS)) - OVERHEAD_TOKENS)
    window = ctx.sliding_window
    if window is not None:
        if high + OVERHEAD_TOKENS <= window:
            high = 2 * window
            low = max(high // 8 - OVERHEAD_TOKENS, MIN_FILLER_TOKENS)
        if low + OVERHEAD_TOKENS < window < high:
            notes.append(f"prompts cross the sliding window ({window} tokens)")
        else:
            notes.append(
                f"every prompt is longer than the sliding window ({window} tokens): the longest "
                "exceeds it, the shortest cannot fit under it"
            )
    else:
        notes.append("sliding window unknown (no model config): lengths span 8x around it")
    if ctx.context_tokens is not None and high + OVERHEAD_TOKENS > ctx.context_tokens:
        high = ctx.context_tokens - OVERHEAD_TOKENS - ctx.recall_max_tokens
        notes.append(f"longest prompt capped by the served context ({ctx.context_tokens} tokens)")
    if count == 1:
        return [high], notes
    ratio = (high / low) ** (1 / (count - 1))
    return [round(low * ratio**k) for k in range(count)], notes


class Ragged:
    name = "ragged"
    sends = (
        "4 to 6 recall prompts sent together whose lengths span 8x or more (fractions and multiples of "
        "--haystack-tokens), the shortest under the model's sliding window where it has one"
    )
    checks = "own needle in every prompt, short and long (another session's = cross-talk)"
    needs_streaming = False

    def unavailable(self, ctx: ShapeContext) -> str | None:
        if ctx.sessions < 2:
            return "needs --sessions 2 or more (lengths must differ in one batch)"
        return None

    def build(self, ctx: ShapeContext) -> ShapePlan:
        rng = ctx.rng(self.name)
        rows = max(MIN_ROWS, min(ctx.sessions, MAX_ROWS))
        targets, notes = lengths(ctx, rows)
        sessions = ctx.take_sessions(rows)
        codes = ctx.new_codes(rng, len(sessions))
        items = []
        for index, (session, code, tokens) in enumerate(zip(sessions, codes, targets)):
            api = ctx.api_for(index)
            items.append(
                recall_item(
                    run_id=ctx.run_id,
                    session=session,
                    code=code,
                    rng=rng,
                    haystack_tokens=tokens,
                    chat=api == "chat",
                    max_tokens=ctx.recall_max_tokens,
                    chars_per_token=ctx.chars_per_token,
                    shape=self.name,
                    api=api,
                ).model_copy(update={"role": _length_role(index, rows)})
            )
        return ShapePlan(self.name, items, [Send(i) for i in items], notes=notes)


def _length_role(index: int, rows: int) -> str:
    return "short" if index == 0 else "long" if index == rows - 1 else "middle"


SHAPE = Ragged()
