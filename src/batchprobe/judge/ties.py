"""Near ties: a wrong answer that parts from its reference where the reference nearly chose it.

A greedy answer is decided token by token; where two tokens are nearly equally likely, the
few hundredths of a nat that a different batch, a different prefill split or a prefix served
from the cache move decide which one comes out, and the rest of the answer follows from it.
A small model does this often (measured on llama.cpp with Gemma 3 270M: 3 of 40 conversation
turns answered differently with the prefix cache on than off, nothing else running, each at
a tie of 0.08-0.18 nats in the cold reference). Such an answer comes back on replay too (the
replay rebuilds the same cache), so replays cannot tell it from a fault; the reference's own
top logprobs can. An answer that parts from its reference at a token the reference did not
list, or listed far below its choice, is a fault's; one that parts at a near tie is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchprobe.client.types import TokenAlternative, TokenChoice
from batchprobe.results.sessions import SessionResult


@dataclass(frozen=True)
class Tie:
    """Where an answer left its reference: at ``index`` the reference took ``chosen`` over
    ``taken`` (what the answer took), ``gap`` nats apart."""

    index: int
    chosen: TokenChoice
    taken: TokenAlternative

    @property
    def gap(self) -> float:
        return self.chosen.logprob - self.taken.logprob

    def describe(self) -> str:
        return (
            f"at token {self.index} its reference took {self.chosen.token!r} "
            f"({self.chosen.logprob:.2f}) over {self.taken.token!r} ({self.taken.logprob:.2f}), "
            f"{self.gap:.2f} nats apart"
        )


def _same_prompt(s: SessionResult, ref: SessionResult) -> bool:
    """Both were sent the same prompt (a reference sent with a nonce differs by it only)."""
    if s.prompt_digest is None or ref.prompt_digest is None or s.prompt_digest == ref.prompt_digest:
        return True
    return ref.situation is not None and ref.situation.nonce is not None


def parting(s: SessionResult, ref: SessionResult) -> Tie | None:
    """Where ``s`` parts from its reference at a token the reference listed, or None (the
    same text, no logprobs, another prompt, or a token the reference did not list).

    The answer's own token boundaries are not known, so at each of the reference's tokens
    the answer may have taken the chosen one or a listed alternative that its text starts
    with; the first alternative it could have taken where the chosen one does not fit is the
    parting. A shorter token taken where a longer listed one also fits ('\\n' against
    '\\n\\n') is the parting when the walk on the shorter one fails later at a token the
    reference did not list. An answer that stops short or runs on has no parting.
    """
    if not ref.top_logprobs or s.text == ref.text or s.error is not None or not _same_prompt(s, ref):
        return None
    done = 0
    possible: Tie | None = None
    for index, token in enumerate(ref.top_logprobs):
        rest = s.text[done:]
        others = [
            a for a in token.alternatives
            if a.token and a.token != token.token and rest.startswith(a.token)
        ]
        likeliest = max(others, key=lambda a: a.logprob, default=None)
        if token.token and rest.startswith(token.token):
            if likeliest is not None and possible is None:
                possible = Tie(index, token, likeliest)
            done += len(token.token)
            continue
        if likeliest is not None:
            return Tie(index, token, likeliest)
        return possible if rest else None  # an answer that ended here is no tie
    return None  # the answer took every token its reference took: it only ran on


def near_tie(s: SessionResult, ref: SessionResult, nats: float) -> Tie | None:
    """The parting of ``s`` from its reference when it was a near tie (``nats`` or closer)."""
    tie = parting(s, ref)
    return tie if tie is not None and tie.gap <= nats else None
