"""The KV-pressure wave's items: counting prompts behind a log excerpt, each sized so that it
fits the KV pool alone and all of them together hold more than the pool.

A count is self-checking: a token repeated or skipped after a preemption breaks it. The run
nonce and the session lead each prompt, so no two share a cached prefix.
"""

from __future__ import annotations

import random

from batchprobe.results.items import Api, WorkItem
from batchprobe.workload.decode import counting_item, counting_prompt
from batchprobe.workload.haystack import filler_lines
from batchprobe.workload.recall import header

NAME = "pressure"
# Tokens the header and the counting line take, besides the log excerpt.
OVERHEAD_TOKENS = 48
# The share of a request's tokens its prompt takes; the rest is its answer (max_tokens).
PROMPT_SHARE = 0.5
# An answer's tokens at most: a count (at least a token a number) then stays in its session's
# block of 1,000 numbers, so a broken count never reads as another session's.
MAX_ANSWER_TOKENS = 900


def pressure_items(
    *, run_id: str, sessions: list[int], tokens_each: int, chars_per_token: float, seed: int,
    api: Api | None,
) -> list[WorkItem]:
    """One counting item per session, of about ``tokens_each`` prompt and answer tokens."""
    max_tokens = max(8, min(MAX_ANSWER_TOKENS, tokens_each - int(tokens_each * PROMPT_SHARE)))
    prompt_tokens = max(OVERHEAD_TOKENS, tokens_each - max_tokens)
    rng = random.Random(f"{seed}:{run_id}:{NAME}")
    return [_item(rng, run_id, session, prompt_tokens, max_tokens, chars_per_token, api)
            for session in sessions]


def oversize_item(
    *, run_id: str, session: int, tokens: int, chars_per_token: float, seed: int,
    api: Api | None,
) -> WorkItem:
    """A counting item whose prompt alone is about ``tokens`` long (past the pool)."""
    rng = random.Random(f"{seed}:{run_id}:{NAME}:oversize")
    item = _item(rng, run_id, session, tokens, 8, chars_per_token, api)
    return item.model_copy(update={"role": "oversize"})


def _item(rng: random.Random, run_id: str, session: int, prompt_tokens: int, max_tokens: int,
          chars_per_token: float, api: Api | None) -> WorkItem:
    # Low in its session's block (decode.count_start's blocks) and in its hundred.
    start = 1000 * (session + 2) + rng.randrange(0, 30)
    item = counting_item(run_id=run_id, session=session, start=start, max_tokens=max_tokens,
                         shape=NAME, api=api)
    filler_chars = int((prompt_tokens - OVERHEAD_TOKENS) * chars_per_token)
    log = "\n".join(filler_lines(rng, filler_chars)) if filler_chars > 0 else ""
    prompt = header(run_id, session) + log + "\n\n" + counting_prompt(run_id, session, start)
    return item.model_copy(update={"prompt": prompt, "role": "pressure"})
