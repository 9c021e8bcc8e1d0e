"""The tokens of one reply, and what the fault modes and ``stop`` strings do to them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from batchprobe import _json
from batchprobe.fake import _tokens
from batchprobe.fake._config import LateFault


@dataclass(frozen=True)
class Answer:
    """The tokens of one reply. ``encoded`` holds each text as a JSON string literal;
    ``off_top`` the indices of tokens sampled below the top-1 (their top logprobs list a
    likelier token first)."""

    texts: tuple[str, ...]
    encoded: tuple[bytes, ...]
    logprobs: tuple[float, ...]
    finish_reason: str
    off_top: frozenset[int] = field(default=frozenset())

    @property
    def text(self) -> str:
        return "".join(self.texts)

    @classmethod
    def of_ids(cls, ids: Sequence[int], finish_reason: str) -> Answer:
        """Vocabulary words, with their JSON encoded once at import (the fast path)."""
        return cls(
            texts=tuple(_tokens.VOCAB[i] for i in ids),
            encoded=tuple(_tokens.VOCAB_JSON[i] for i in ids),
            logprobs=tuple(_tokens.VOCAB_LOGPROB[i] for i in ids),
            finish_reason=finish_reason,
        )

    @classmethod
    def sampled(cls, ids: Sequence[int]) -> Answer:
        """Sampled vocabulary words: about one in three passed over a likelier token."""
        off_top = frozenset(i for i, tid in enumerate(ids) if tid % 3 == 0)
        plain = cls.of_ids(ids, "length")
        logprobs = tuple(
            _tokens.SAMPLED_LOGPROB if i in off_top else lp for i, lp in enumerate(plain.logprobs)
        )
        return cls(plain.texts, plain.encoded, logprobs, "length", off_top)

    def kept(self, count: int, finish_reason: str) -> Answer:
        """The first ``count`` tokens, ending with ``finish_reason``."""
        kept = slice(0, count)
        off_top = frozenset(i for i in self.off_top if i < count)
        return Answer(
            self.texts[kept], self.encoded[kept], self.logprobs[kept], finish_reason, off_top
        )

    @classmethod
    def of_texts(
        cls,
        texts: Sequence[str],
        logprobs: Sequence[float],
        finish_reason: str,
        off_top: frozenset[int] = frozenset(),
    ) -> Answer:
        return cls(
            texts=tuple(texts),
            encoded=tuple(_json.dumps(t) for t in texts),
            logprobs=tuple(logprobs),
            finish_reason=finish_reason,
            off_top=off_top,
        )


ERROR_ANSWER = Answer((), (), (), "error")

# ignore_max_tokens answers this many times max_tokens (at least RUNAWAY_MIN_TOKENS), far past
# any client's patience; the repeated tuples share their strings, so it costs the server little.
RUNAWAY_FACTOR = 64
RUNAWAY_MIN_TOKENS = 1 << 12


def runaway(answer: Answer, max_tokens: int) -> Answer:
    """``answer`` repeated far beyond ``max_tokens``: a server whose stop condition is broken."""
    if not answer.texts:
        return answer
    total = max(RUNAWAY_FACTOR * max_tokens, RUNAWAY_MIN_TOKENS)
    times = -(-total // len(answer.texts))
    return Answer(
        answer.texts * times, answer.encoded * times, answer.logprobs * times, "length"
    )


def cut_at_stop(answer: Answer, stops: Sequence[str]) -> Answer:
    """The text before the first occurrence of any stop string, finish "stop"; the token
    holding the stop keeps what precedes it, as engines stream it."""
    text = answer.text
    hits = [at for at in (text.find(stop) for stop in stops) if at >= 0]
    if not hits:
        return answer
    cut = min(hits)
    texts: list[str] = []
    logprobs: list[float] = []
    end = 0
    for piece, logprob in zip(answer.texts, answer.logprobs):
        if end + len(piece) > cut:
            if cut > end:
                texts.append(piece[: cut - end])
                logprobs.append(logprob)
            break
        texts.append(piece)
        logprobs.append(logprob)
        end += len(piece)
    off_top = frozenset(i for i in answer.off_top if i < len(texts))
    return Answer.of_texts(texts, logprobs, "stop", off_top)


def corrupt(answer: Answer, *, start: int = 0, every: int = 4) -> Answer:
    """Wrong tokens: every ``every``-th token from ``start`` on (1 = all of them)."""
    texts = list(answer.texts)
    logprobs = list(answer.logprobs)
    for index in range(start + every - 1, len(texts), every):
        texts[index] = _tokens.corrupt_piece(texts[index])
        logprobs[index] = _tokens.CORRUPT_LOGPROB
    return Answer.of_texts(texts, logprobs, answer.finish_reason, answer.off_top)


def flip(answer: Answer) -> Answer:
    """One wrong token half-way (a numerics flip), its own text otherwise."""
    if not answer.texts:
        return answer
    index = len(answer.texts) // 2
    texts = list(answer.texts)
    logprobs = list(answer.logprobs)
    texts[index] = _tokens.corrupt_piece(texts[index])
    logprobs[index] = _tokens.CORRUPT_LOGPROB
    return Answer.of_texts(texts, logprobs, answer.finish_reason, answer.off_top)


def clean_stop(answer: Answer) -> Answer:
    """The reply ended half-way with finish "stop", as if the model had ended it."""
    return answer.kept(len(answer.texts) // 2, "stop")


def repeated(answer: Answer, at: int, count: int) -> Answer:
    """The ``count`` tokens before ``at`` generated again at ``at`` (a preempted request
    resumed from a stale position); the reply keeps its length."""
    start = max(0, at - count)
    texts = [*answer.texts[:at], *answer.texts[start:at], *answer.texts[at:]]
    logprobs = [*answer.logprobs[:at], *answer.logprobs[start:at], *answer.logprobs[at:]]
    size = len(answer.texts)
    return Answer.of_texts(texts[:size], logprobs[:size], answer.finish_reason,
                           frozenset(i for i in answer.off_top if i < size))


def fault_from(answer: Answer, start: int, fault: LateFault) -> Answer:
    """The ``early`` trigger's version of ``answer``: tokens from ``start`` on faulted.

    ``corrupt`` turns them all bad (the ``!!!!`` of a batch whose survivors lost their
    state); ``finish_error`` ends the reply there with finish_reason "error";
    ``truncated_stream`` also ends it there (the stream writer drops the connection);
    ``clean_stop`` ends it there with finish_reason "stop", as if the model had ended it.
    """
    if fault == "corrupt":
        return corrupt(answer, start=start, every=1)
    return answer.kept(start, "stop" if fault == "clean_stop" else "error")
