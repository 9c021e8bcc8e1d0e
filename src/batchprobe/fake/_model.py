"""What the fake answers, like a sane model would, so self-checking items can check it.

Recall prompts get their needle code; counting prompts get the count continued; anything
else gets deterministic pseudo-words derived from the prompt. Per-request parameters act as
an engine's would: a forcing ``logit_bias`` makes every token its token, ``temperature`` > 0
gives other (seeded, still prompt-derived) text, ``stop`` strings and ``max_tokens`` cut it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import count, islice

from batchprobe.fake import _tokens
from batchprobe.fake._answer import Answer, cut_at_stop
from batchprobe.fake._requests import Api, GenRequest, Sampling

# The decode workload's prompts (batchprobe.workload.decode): the completion style ends in
# the numbers so far, the chat style names where to start.
_COUNTING = re.compile(r"Counting from \d+:(?: \d+,)* (\d+),\s*$")
_COUNT_UPWARDS = re.compile(r"Count upwards from (\d+)")


def respond(
    gen: GenRequest,
    *,
    prompt: str,
    code: str | None,
    sampling: Sampling,
    vocab: _tokens.Vocabulary,
) -> Answer:
    """The reply to ``gen`` as if its prompt were ``prompt`` and its parameters ``sampling``
    (the cross_talk and param_leak faults pass another request's), cut by its own ``stop``
    and ``max_tokens``."""
    forced = sampling.forced_token()
    if forced is not None:
        piece = vocab.piece(forced)
        if piece is None:  # the handler checks ids on arrival; this is a guard, not a path
            raise ValueError(f"logit_bias: unknown token id {forced}")
        forced_logprobs = [_tokens.FORCED_LOGPROB] * gen.max_tokens
        answer = Answer.of_texts([piece] * gen.max_tokens, forced_logprobs, "length")
    elif code is not None:
        answer = _recall(gen.api, code, gen.max_tokens)
    else:
        answer = _decode(gen, prompt, sampling)
    return cut_at_stop(answer, gen.stop)


def checkable(gen: GenRequest, code: str | None) -> bool:
    """Whether ``gen``'s answer is determined by its prompt: a needle, or a greedy count
    (what a numerics flip can be seen in)."""
    if code is not None:
        return True
    sampling = gen.sampling
    return not sampling.sampled and sampling.forced_token() is None and (
        _count_from(gen.prompt) is not None
    )


def unknown_bias_id(sampling: Sampling, vocab: _tokens.Vocabulary) -> int | None:
    """The first logit_bias token id the fake never handed out, if any."""
    return next((tid for tid, _ in sampling.logit_bias if vocab.piece(tid) is None), None)


def _recall(api: Api, code: str, max_tokens: int) -> Answer:
    """The code as the first token, then a newline (finish "stop"); cut to ``max_tokens``."""
    lead = " " if api == "completions" else ""
    texts = (f"{lead}{code}", "\n")[:max_tokens]
    logprobs = (_tokens.CODE_LOGPROB, _tokens.NEWLINE_LOGPROB)[: len(texts)]
    return Answer.of_texts(texts, logprobs, "stop" if len(texts) == 2 else "length")


def _decode(gen: GenRequest, prompt: str, sampling: Sampling) -> Answer:
    """Exactly ``max_tokens`` tokens: the count on a counting prompt (sampled too: its next
    number is near certain, as a real model keeps counting at temperature 1), else
    pseudo-words, other ones when sampled; finish "length" (neither ever ends by itself)."""
    numbers = _count_from(prompt)
    if numbers is not None:
        texts = list(islice(numbers, gen.max_tokens))
        return Answer.of_texts(texts, [_tokens.COUNT_LOGPROB] * len(texts), "length")
    if not sampling.sampled:
        return Answer.of_ids(_tokens.decode_ids(prompt, gen.max_tokens), "length")
    # Seeded by the prompt and the parameters: reproducible, yet not the greedy text.
    key = f"{prompt}\x00{sampling.temperature}:{sampling.top_p}:{gen.seed}"
    return Answer.sampled(_tokens.decode_ids(key, gen.max_tokens))


def _count_from(prompt: str) -> Iterator[str] | None:
    """The count's tokens, one number and its comma each, or None for another prompt."""
    match = _COUNTING.search(prompt)
    if match is not None:
        return (f" {n}," for n in count(int(match.group(1)) + 1))
    upwards = _COUNT_UPWARDS.search(prompt)
    if upwards is None:
        return None
    first = int(upwards.group(1))
    return (f"{n}," if n == first else f" {n}," for n in count(first))
