"""The KV-pressure wave's items: counting prompts behind a log excerpt, each sized so that it
fits the KV pool alone and all of them together hold more than the pool.

A count is self-checking: a token repeated or skipped after a preemption breaks it. The run
nonce and the session lead each prompt, so no two share a cached prefix.
"""

from __future__ import annotations

import random

from batchprobe.workload.decode import count_start, counting_item, counting_prompt
from batchprobe.workload.haystack import filler_lines
from batchprobe.workload.items import Api, WorkItem
from batchprobe.workload.recall import header

NAME = "pressure"
# Tokens the header and the counting line take, besides the log excerpt.
OVERHEAD_TOKENS = 48
# The share of a request's tokens its prompt takes; the rest is its answer (max_tokens).
PROMPT_SHARE = 0.5


def pressure_items(
    *, run_id: str, sessions: list[int], tokens_each: int, chars_per_token: float, seed: int,
    api: Api | None,
) -> list[WorkItem]:
    """One counting item per session, of about ``tokens_each`` prompt and answer tokens."""
    rng = random.Random(f"{seed}:{run_id}:{NAME}")
    prompt_tokens = max(OVERHEAD_TOKENS, int(tokens_each * PROMPT_SHARE))
    max_tokens = max(8, tokens_each - prompt_tokens)
    filler_chars = int((prompt_tokens - OVERHEAD_TOKENS) * chars_per_token)
    items = []
    for session in sessions:
        start = count_start(rng, session)
        item = counting_item(run_id=run_id, session=session, start=start, max_tokens=max_tokens,
                             shape=NAME, api=api)
        log = "\n".join(filler_lines(rng, filler_chars)) if filler_chars > 0 else ""
        prompt = header(run_id, session) + log + "\n\n" + counting_prompt(run_id, session, start)
        items.append(item.model_copy(update={"prompt": prompt, "role": "pressure"}))
    return items


def oversize_item(
    *, run_id: str, session: int, tokens: int, chars_per_token: float, seed: int,
    api: Api | None,
) -> WorkItem:
    """A counting item whose prompt alone is about ``tokens`` long (past the pool)."""
    (item,) = pressure_items(run_id=run_id, sessions=[session], tokens_each=2 * tokens,
                             chars_per_token=chars_per_token, seed=seed + 1, api=api)
    return item.model_copy(update={"max_tokens": 8, "role": "oversize"})
