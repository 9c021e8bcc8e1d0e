"""What a request is answered with: a recall code, decode tokens, or a fault's version of them."""

from __future__ import annotations

from dataclasses import dataclass

from batchprobe import _json
from batchprobe.fake import _tokens
from batchprobe.fake._requests import GenRequest


@dataclass(frozen=True)
class Answer:
    """The tokens of one reply. ``encoded`` holds each text as a JSON string literal."""

    texts: tuple[str, ...]
    encoded: tuple[bytes, ...]
    logprobs: tuple[float, ...]
    finish_reason: str

    @property
    def text(self) -> str:
        return "".join(self.texts)


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


def recall_answer(gen: GenRequest, code: str) -> Answer:
    """The code as the first token, then a newline; cut to ``max_tokens``."""
    lead = " " if gen.api == "completions" else ""
    texts = (f"{lead}{code}", "\n")[: gen.max_tokens]
    logprobs = (_tokens.CODE_LOGPROB, _tokens.NEWLINE_LOGPROB)[: len(texts)]
    finish = "stop" if len(texts) == 2 else "length"
    return Answer(texts, tuple(_json.dumps(t) for t in texts), logprobs, finish)


def decode_answer(gen: GenRequest, *, corrupt: bool) -> Answer:
    """Exactly ``max_tokens`` pseudo-words derived from the prompt; finish "length"."""
    ids = _tokens.decode_ids(gen.prompt, gen.max_tokens)
    if corrupt:
        ids = _tokens.corrupt_ids(ids)
    return Answer(
        texts=tuple(_tokens.VOCAB[i] for i in ids),
        encoded=tuple(_tokens.VOCAB_JSON[i] for i in ids),
        logprobs=tuple(_tokens.VOCAB_LOGPROB[i] for i in ids),
        finish_reason="length",
    )
