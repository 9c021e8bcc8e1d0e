"""The recall workload: one haystack per session, each with its own unique needle."""

from __future__ import annotations

import random

from batchprobe.results.items import Api, WorkItem
from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN, filler_lines
from batchprobe.workload.needle import NEEDLE_KEY, make_codes, needle_line

_CHAT_QUESTION = (
    "\n\nOne line of the log above has the form {key}=<digits>. "
    "What is the value of {key}? Reply with the digits only."
)


def header(run_id: str, session: int) -> str:
    # The run nonce comes first so no two runs (and no two sessions) share a cached prefix.
    return f"[run {run_id} session {session}] Server log excerpt:\n"


def ending(chat: bool, key: str = NEEDLE_KEY) -> str:
    """What follows the haystack: a question (chat) or the key to complete (completion)."""
    return _CHAT_QUESTION.format(key=key) if chat else f"\n\nThe {key} line again:\n{key}="


def haystack(rng: random.Random, code: str, target_chars: int) -> tuple[str, float]:
    """(log lines with the needle at a seeded depth, that depth)."""
    lines = filler_lines(rng, target_chars)
    depth = rng.uniform(0.1, 0.9)
    lines.insert(int(len(lines) * depth), needle_line(code))
    return "\n".join(lines), depth


def recall_item(
    *,
    run_id: str,
    session: int,
    code: str,
    rng: random.Random,
    haystack_tokens: int,
    chat: bool,
    max_tokens: int,
    chars_per_token: float,
    shape: str = "burst",
    api: Api | None = None,
) -> WorkItem:
    body, depth = haystack(rng, code, int(haystack_tokens * chars_per_token))
    return WorkItem(
        workload="recall",
        session=session,
        prompt=header(run_id, session) + body + ending(chat),
        max_tokens=max_tokens,
        shape=shape,
        api=api,
        expected_code=code,
        depth=round(depth, 3),
    )


def build_recall_items(
    *,
    run_id: str,
    sessions: int,
    haystack_tokens: int,
    prompt_style: str,
    max_tokens: int,
    seed: int,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    first_session: int = 0,
) -> list[WorkItem]:
    """``sessions`` recall items with distinct codes at seeded depths (the burst wave's)."""
    rng = random.Random(f"{seed}:{run_id}:recall")
    codes = make_codes(rng, sessions)
    return [
        recall_item(
            run_id=run_id,
            session=first_session + offset,
            code=code,
            rng=rng,
            haystack_tokens=haystack_tokens,
            chat=prompt_style == "chat",
            max_tokens=max_tokens,
            chars_per_token=chars_per_token,
        )
        for offset, code in enumerate(codes)
    ]
