"""The decode workload: short prompts that force long greedy output."""

from __future__ import annotations

import random

from batchprobe.workload.items import WorkItem


def build_decode_items(
    *, run_id: str, sessions: int, max_tokens: int, prompt_style: str, seed: int
) -> list[WorkItem]:
    rng = random.Random(f"{seed}:{run_id}:decode")
    items = []
    for session in range(sessions):
        start = rng.randrange(100, 900) * 10
        numbers = ", ".join(str(n) for n in range(start, start + 4))
        if prompt_style == "chat":
            prompt = (
                f"[run {run_id} session {session}] Count upwards from {start}, one number after "
                f"another separated by commas, and do not stop."
            )
        else:
            prompt = f"[run {run_id} session {session}] Counting from {start}: {numbers},"
        items.append(WorkItem(workload="decode", session=session, prompt=prompt, max_tokens=max_tokens))
    return items
