"""Deterministic pseudo-words: what the fake server "generates" for decode prompts.

Text depends only on a hash of the prompt, so the same prompt gives the same tokens in every
run, arm and concurrency level: exactly the greedy-equivalence a batch-invariant engine has.
"""

from __future__ import annotations

import hashlib
import random
from itertools import product

from batchprobe import _json

_ONSETS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_VOCAB_BITS = 9
_VOCAB_SIZE = 1 << _VOCAB_BITS  # a power of two, so one getrandbits call picks a word


def _build_vocab() -> tuple[str, ...]:
    syllables = ["".join(pair) for pair in product(_ONSETS, _VOWELS)]
    words = ["".join(pair) for pair in product(syllables, syllables)]
    # A fixed sample rather than the first words, so text does not read "baba babe babi".
    return tuple(f" {word}" for word in random.Random(0).sample(words, _VOCAB_SIZE))


VOCAB: tuple[str, ...] = _build_vocab()
# Encoded once so the per-token streaming path never calls a JSON encoder.
VOCAB_JSON: tuple[bytes, ...] = tuple(_json.dumps(word) for word in VOCAB)
# A fixed, plausible-looking logprob per word (the same word always gets the same value).
VOCAB_LOGPROB: tuple[float, ...] = tuple(
    -round(0.05 + (i % 97) / 50, 4) for i in range(_VOCAB_SIZE)
)

CODE_LOGPROB = -0.0012
NEWLINE_LOGPROB = -0.0301


def decode_ids(prompt: str, count: int) -> list[int]:
    """``count`` vocabulary indices derived from a hash of ``prompt``."""
    digest = hashlib.blake2b(prompt.encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    return [rng.getrandbits(_VOCAB_BITS) for _ in range(count)]


def corrupt_ids(ids: list[int]) -> list[int]:
    """Swap every fourth token for its neighbour word: plausible text, wrong tokens."""
    return [(tid + 1) % _VOCAB_SIZE if i % 4 == 3 else tid for i, tid in enumerate(ids)]


def corrupt_code(code: str) -> str:
    """Change the last three digits, so the answer is a miss, not another session's code."""
    head, tail = code[:-3], code[-3:]
    return head + "".join(str((int(ch) + 5) % 10) for ch in tail)
