"""How many characters make a token for this server's tokenizer (for haystack sizing)."""

from __future__ import annotations

import random

from batchprobe.client.types import CompletionRequest
from batchprobe.send.asking import Asker
from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN, filler_lines

_SAMPLE_TOKENS = 400
# Every real tokenizer lands in this range on English-like log lines (~4 here); a count that
# implies more or fewer characters per token is a server bug, not a tokenizer.
PLAUSIBLE_CHARS_PER_TOKEN = (1.0, 12.0)
# A server's count holds the tokens it adds (a BOS, a chat template's markers): up to this many
# are not held against a character-level tokenizer's 1.0.
_ADDED_TOKENS = 16


async def calibrate_chars_per_token(
    client: Asker, run_id: str, prompt_style: str
) -> tuple[float | None, str | None]:
    """(chars per token, a warning when it had to fall back to the estimate).

    Uses the server's tokenize endpoint when it has one, else ``usage.prompt_tokens`` of a
    one-token request on a filler sample that shares no prefix with any measured prompt.
    """
    sample = f"[calibration {run_id}]\n" + "\n".join(
        filler_lines(random.Random(run_id), int(_SAMPLE_TOKENS * DEFAULT_CHARS_PER_TOKEN))
    )
    tokens = await client.tokenize(sample)
    if tokens is None:
        record = await client.complete(
            CompletionRequest(
                request_id=f"{run_id}-calibration",
                api="chat" if prompt_style == "chat" else "completions",
                prompt=sample,
                max_tokens=1,
                stream=False,
            )
        )
        tokens = record.prompt_tokens
    estimate = f"haystack size estimated at {DEFAULT_CHARS_PER_TOKEN} characters per token"
    if not tokens:
        return None, f"{estimate}: the server reported no token counts"
    low, high = PLAUSIBLE_CHARS_PER_TOKEN
    ratio = len(sample) / tokens
    if tokens < 0 or ratio > high or len(sample) / max(1, tokens - _ADDED_TOKENS) < low:
        return None, (
            f"{estimate}: the server counted {tokens} tokens in a {len(sample)}-character "
            f"sample, outside the plausible {low:g}..{high:g} characters per token; "
            "its token counts (usage) are not trusted"
        )
    return ratio, None
