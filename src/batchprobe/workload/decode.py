"""The decode workload: counting prompts whose continuation the prompt determines."""

from __future__ import annotations

import random

from batchprobe.results.items import Api, CountSpec, SamplingParams, WorkItem

# How many numbers the prompt shows before the model takes over.
SHOWN = 4


def counting_prompt(run_id: str, session: int, start: int) -> str:
    numbers = ", ".join(str(n) for n in range(start, start + SHOWN))
    return f"[run {run_id} session {session}] Counting from {start}: {numbers},"


def counting_item(
    *,
    run_id: str,
    session: int,
    start: int,
    max_tokens: int,
    shape: str,
    api: Api | None = None,
    params: SamplingParams | None = None,
) -> WorkItem:
    """A counting item; on either API the model continues ``start+4, start+5, ...``."""
    return WorkItem(
        workload="decode",
        session=session,
        prompt=counting_prompt(run_id, session, start),
        max_tokens=max_tokens,
        shape=shape,
        api=api,
        count=CountSpec(first=start + SHOWN, leading_space=api != "chat"),
        params=params or SamplingParams(),
    )


# Open-ended beginnings: text a greedy model continues its own way, with no one right answer
# (its serial reference is the comparison, and its top logprobs show whether it was sampled).
_OPENINGS = (
    "The old lighthouse keeper opened the door and",
    "When the train finally stopped in the small town,",
    "She unfolded the map on the kitchen table and",
    "The first thing the engineers noticed about the bridge was",
)


def open_item(
    *,
    run_id: str,
    session: int,
    max_tokens: int,
    shape: str,
    api: Api | None = None,
    top_logprobs: int | None = None,
) -> WorkItem:
    """A greedy open-ended prompt (no count, no needle): judged against its serial text."""
    opening = _OPENINGS[session % len(_OPENINGS)]
    if api == "chat":
        prompt = f"[run {run_id} session {session}] Continue this story: {opening}"
    else:
        prompt = f"[run {run_id} session {session}] {opening}"
    return WorkItem(
        workload="decode",
        session=session,
        prompt=prompt,
        max_tokens=max_tokens,
        shape=shape,
        api=api,
        top_logprobs=top_logprobs,
    )


def count_start(rng: random.Random, session: int) -> int:
    """A start in the session's own block of 1,000: no two sessions' counts share a number.

    Low in its hundred, so a count of ~60 numbers never rolls over one: gemma3-270m writes
    18499 -> '1849a', and a fragile step is where numerics differing under batching would
    flip a token of a healthy engine.
    """
    return 1000 * (session + 2) + 100 * rng.randrange(0, 9) + rng.randrange(0, 30)


def count_owner(number: int) -> int | None:
    """The session whose block holds ``number`` (the inverse of :func:`count_start`)."""
    return number // 1000 - 2 if number >= 2000 else None


def build_decode_items(
    *,
    run_id: str,
    sessions: int,
    max_tokens: int,
    prompt_style: str,
    seed: int,
    first_session: int = 0,
    shape: str = "burst",
) -> list[WorkItem]:
    rng = random.Random(f"{seed}:{run_id}:decode:{shape}")
    items = []
    for session in range(first_session, first_session + sessions):
        start = count_start(rng, session)
        if prompt_style == "chat":
            prompt = (
                f"[run {run_id} session {session}] Count upwards from {start}, one number after "
                f"another separated by commas, and do not stop."
            )
            count = CountSpec(first=start, leading_space=False)
            items.append(
                WorkItem(workload="decode", session=session, prompt=prompt, max_tokens=max_tokens,
                         shape=shape, count=count)
            )
        else:
            items.append(
                counting_item(run_id=run_id, session=session, start=start,
                              max_tokens=max_tokens, shape=shape)
            )
    return items
