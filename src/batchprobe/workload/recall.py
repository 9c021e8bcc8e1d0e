"""The recall workload: one haystack per session, each with its own unique needle."""

from __future__ import annotations

import random

from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN, filler_lines
from batchprobe.workload.items import WorkItem
from batchprobe.workload.needle import NEEDLE_KEY, make_codes, needle_line

_CHAT_QUESTION = (
    f"\n\nOne line of the log above has the form {NEEDLE_KEY}=<digits>. "
    f"What is the value of {NEEDLE_KEY}? Reply with the digits only."
)


def _header(run_id: str, session: int) -> str:
    # The run nonce comes first so no two runs (and no two sessions) share a cached prefix.
    return f"[run {run_id} session {session}] Server log excerpt:\n"


def build_recall_items(
    *,
    run_id: str,
    sessions: int,
    haystack_tokens: int,
    prompt_style: str,
    max_tokens: int,
    seed: int,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
) -> list[WorkItem]:
    """``sessions`` recall items with distinct codes at seeded depths."""
    rng = random.Random(f"{seed}:{run_id}:recall")
    codes = make_codes(rng, sessions)
    target_chars = int(haystack_tokens * chars_per_token)
    items = []
    for session, code in enumerate(codes):
        lines = filler_lines(rng, target_chars)
        depth = rng.uniform(0.1, 0.9)
        lines.insert(int(len(lines) * depth), needle_line(code))
        body = "\n".join(lines)
        if prompt_style == "chat":
            prompt = _header(run_id, session) + body + _CHAT_QUESTION
        else:
            prompt = _header(run_id, session) + body + f"\n\nThe {NEEDLE_KEY} line again:\n{NEEDLE_KEY}="
        items.append(
            WorkItem(
                workload="recall",
                session=session,
                prompt=prompt,
                max_tokens=max_tokens,
                expected_code=code,
                depth=round(depth, 3),
            )
        )
    return items
