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
# A count's next number is near certain; a forced token has the whole mass.
COUNT_LOGPROB = -0.0087
FORCED_LOGPROB = 0.0
CORRUPT_LOGPROB = -7.25


def decode_ids(prompt: str, count: int) -> list[int]:
    """``count`` vocabulary indices derived from a hash of ``prompt``."""
    digest = hashlib.blake2b(prompt.encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    return [rng.getrandbits(_VOCAB_BITS) for _ in range(count)]


def corrupt_code(code: str) -> str:
    """Change the last three digits, so the answer is a miss, not another session's code."""
    head, tail = code[:-3], code[-3:]
    return head + "".join(str((int(ch) + 5) % 10) for ch in tail)


# Each word's id in VOCAB, for /tokenize and for corrupting text tokens.
VOCAB_IDS: dict[str, int] = {word: i for i, word in enumerate(VOCAB)}
# Words outside VOCAB that /tokenize may give ids to; more is a client bug, not a vocabulary.
_EXTRA_LIMIT = 1 << 16
CORRUPT_PIECE = "!!!!"


class Vocabulary:
    """The fake's token ids: VOCAB's words first, then the words ``/tokenize`` met outside
    VOCAB, numbered in the order met (one per app, so ids stay stable while it serves).

    Ids exist so a client can aim a ``logit_bias`` at a word: one id per whitespace word,
    each word's text carrying the leading space, as a BPE vocabulary would.
    """

    def __init__(self) -> None:
        self._extra: list[str] = []
        self._extra_ids: dict[str, int] = {}

    def tokenize(self, content: str) -> list[int]:
        return [self._id(f" {word}") for word in content.split()]

    def piece(self, token_id: int) -> str | None:
        """The text of ``token_id``, or None when no such id was handed out."""
        if 0 <= token_id < _VOCAB_SIZE:
            return VOCAB[token_id]
        index = token_id - _VOCAB_SIZE
        return self._extra[index] if 0 <= index < len(self._extra) else None

    def _id(self, piece: str) -> int:
        known = VOCAB_IDS.get(piece)
        if known is None:
            known = self._extra_ids.get(piece)
        if known is None:
            if len(self._extra) >= _EXTRA_LIMIT:
                raise ValueError(f"more than {_EXTRA_LIMIT} distinct words outside the vocabulary")
            known = self._extra_ids[piece] = _VOCAB_SIZE + len(self._extra)
            self._extra.append(piece)
        return known


def corrupt_piece(piece: str) -> str:
    """A wrong token in place of ``piece``: its neighbour word for a vocabulary word (text
    that still reads like words), ``!!!!`` for anything else (a count, a forced token)."""
    known = VOCAB_IDS.get(piece)
    if known is not None:
        return VOCAB[(known + 1) % _VOCAB_SIZE]
    return (" " if piece.startswith(" ") else "") + CORRUPT_PIECE


# A sampled token that passed over a likelier one, and that likelier token's logprob.
SAMPLED_LOGPROB = -1.6
PASSED_OVER_LOGPROB = -0.4


def alternatives(piece: str, index: int, count: int) -> list[str]:
    """``count`` vocabulary words other than ``piece``: the runners-up at position
    ``index`` in a reply's top logprobs (deterministic, distinct)."""
    digest = hashlib.blake2b(f"{index}\x00{piece}".encode(), digest_size=4).digest()
    first = int.from_bytes(digest, "big") % _VOCAB_SIZE
    words = (VOCAB[(first + step) % _VOCAB_SIZE] for step in range(count + 1))
    return [word for word in words if word != piece][:count]
