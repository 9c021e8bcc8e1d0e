"""What the fake answers, like a sane model would, so self-checking items can check it.

Recall prompts get their needle code; counting prompts get the count continued; anything
else gets deterministic pseudo-words derived from the prompt. Per-request parameters act as
an engine's would: a forcing ``logit_bias`` makes every token its token, ``temperature`` > 0
gives other (seeded, still prompt-derived) text, ``stop`` strings and ``max_tokens`` cut it,
strong presence/frequency penalties break a count (``penalised``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import count, islice

from batchprobe.fake import _tokens
from batchprobe.fake._answer import Answer, corrupt, cut_at_stop
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
    elif sampling.constraint is not None:
        answer = _constrained(sampling.constraint, gen.max_tokens)
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
    penalties = sampling.presence_penalty or sampling.frequency_penalty
    return not sampling.sampled and sampling.forced_token() is None and not penalties and (
        _count_from(gen.prompt) is not None
    )


def unknown_bias_id(sampling: Sampling, vocab: _tokens.Vocabulary) -> int | None:
    """The first logit_bias token id the fake never handed out, if any."""
    return next((tid for tid, _ in sampling.logit_bias if vocab.piece(tid) is None), None)


# The one answer each constraint allows the fake, token by token.
_CONSTRAINED = {
    "json_schema": ('{"', "answer", '":', ' "', "yes", '"}'),
    "grammar": ("yes",),
}


def _constrained(kind: str, max_tokens: int) -> Answer:
    """What a constrained row gets: the schema's or the grammar's answer, finish "stop"."""
    whole = _CONSTRAINED[kind]
    texts = whole[:max_tokens]
    finish = "stop" if len(texts) == len(whole) else "length"
    return Answer.of_texts(texts, [_tokens.COUNT_LOGPROB] * len(texts), finish)


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
        counted = Answer.of_texts(texts, [_tokens.COUNT_LOGPROB] * len(texts), "length")
        broken = penalised(texts, sampling.presence_penalty, sampling.frequency_penalty)
        return counted if broken is None else corrupt(counted, start=broken, every=1)
    if not sampling.sampled:
        return Answer.of_ids(_tokens.decode_ids(prompt, gen.max_tokens), "length")
    # Seeded by the prompt and the parameters: reproducible, yet not the greedy text.
    key = f"{prompt}\x00{sampling.temperature}:{sampling.top_p}:{gen.seed}"
    return Answer.sampled(_tokens.decode_ids(key, gen.max_tokens))


# How far a count's next token stands above its runner-up, in logits (COUNT_LOGPROB: near
# certain); a penalty larger than this on it makes the runner-up the greedy choice.
COUNT_MARGIN = 8.0


def penalised(texts: Sequence[str], presence: float, frequency: float) -> int | None:
    """The first count token that presence and frequency penalties push below its runner-up,
    or None. Penalised as an engine whose tokenizer splits digits (Gemma's, Llama's) would:
    each character its own token, counted over the tokens generated before it (as vLLM
    counts; llama.cpp counts the prompt too), against a runner-up never generated."""
    seen: Counter[str] = Counter()
    for index, text in enumerate(texts):
        for char in text:
            times = seen[char]
            if presence * (times > 0) + frequency * times > COUNT_MARGIN:
                return index
            seen[char] += 1
    return None


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
