"""Checks of one answer against its own request and its serial reference.

Each returns the evidence of what broke, or None. They need no other session: the judge
(``probe.judge``) decides what an answer's failure means (cross-talk, a flip, a failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from batchprobe.client.types import ErrorKind
from batchprobe.results.sessions import SessionResult
from batchprobe.workload.checks import count_ideal, penalty_break, shows_bias, stop_sources
from batchprobe.workload.constraints import looks_constrained

# A refusal of the request itself (its path or a parameter), as opposed to a failure to
# answer it: the server does not serve what was asked.
_REFUSED_STATUS = frozenset({404, 405, 422})
# Request fields a 400 may name when the server does not take them.
_FIELDS = (
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "top_p",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
    "grammar",
    "seed",
    "messages",
    "prompt",
)


def refused(s: SessionResult) -> bool:
    """The server refused the request's path or a parameter (404, 405, 422, or a 400 that
    names a request field): not served, rather than answered wrongly."""
    error = s.error
    if error is None or error.kind is not ErrorKind.HTTP_STATUS or error.http_status is None:
        return False
    if error.http_status in _REFUSED_STATUS:
        return True
    body = (error.body_excerpt or "") + error.message
    return error.http_status == 400 and any(f in body for f in _FIELDS)


def several(s: SessionResult) -> bool:
    """A row that asked for several choices: its usage counts them all (OpenAI sums them)
    or one of them (llama.cpp gives each choice its own), so it says nothing of one."""
    return s.situation is not None and s.situation.choices is not None


def tokens(s: SessionResult) -> int:
    """How long the reply is: the pieces streamed, or the usage's count where it says more
    (an engine may stream two tokens in one chunk). Usage that says less than what streamed
    is not this reply's own (``usage_mismatch``), not a short reply. A row of several
    choices too: its usage counts one choice at least."""
    return max(len(s.chunk_ends), s.completion_tokens or 0)


def _max_tokens(s: SessionResult) -> int | None:
    return s.situation.max_tokens if s.situation is not None else None


def _stops(s: SessionResult) -> list[str]:
    return s.situation.stop if s.situation is not None else []


def short_length(s: SessionResult, slack: int) -> str | None:
    """A reply that says it ran out of tokens short of its own max_tokens (it ran with
    another row's): judged on any model, whatever its text."""
    limit = _max_tokens(s)
    got = tokens(s)
    if limit is not None and s.error is None and s.finish_reason == "length" and got + slack < limit:
        return f"finish 'length' after {got} of its max_tokens {limit}"
    return None


def _free_cuts(s: SessionResult) -> bool:
    """Under a JSON schema or grammar the same text may come cut into other tokens: the
    constrained sampler picks among every token that keeps the text valid, and llama.cpp's
    takes `"answer"` whole in one run and in four pieces in another, alone as well."""
    return s.situation is not None and s.situation.constraint is not None


def ended_early(s: SessionResult, ref: SessionResult, slack: int) -> str | None:
    """A reply that stopped where its reference, with the same text so far, went on, and with
    no reason of its own to stop: a 'length' finish short of its own max_tokens, or a stop
    before its own stop string (the reference shows where that is) or an end-of-sequence its
    reference did not take there."""
    if _max_tokens(s) is None or s.error is not None:
        return None
    short = short_length(s, slack)
    if short is not None:
        return short
    got, went = tokens(s), tokens(ref)
    if s.finish_reason == "length" or got + slack >= went:
        return None
    if s.prompt_digest != ref.prompt_digest:
        return None  # a later turn built from its own answers: another prompt, another end
    if _free_cuts(s) and s.text == ref.text:
        return None  # its reference's whole text, in fewer tokens
    if any(ref.text.startswith(s.text + stop) for stop in _stops(s)):
        return None  # its own stop string, where its reference has it
    if not ref.text.startswith(s.text):
        # It diverged before it stopped: another text may end anywhere (numerics on an engine
        # that is not batch-invariant; the greedy comparison reports it). Only a reply that
        # is its reference's text cut short has no reason of its own to stop.
        return None
    return (
        f"ended with finish {s.finish_reason!r} after {got} tokens; its serial reference, the "
        f"same text so far, went on to {went} tokens (finish {ref.finish_reason!r})"
    )


def usage_mismatch(s: SessionResult, ref: SessionResult | None, slack: int) -> str | None:
    """Usage that is not this reply's: fewer completion tokens than pieces streamed, other
    completion tokens than its reference for the same text, or other prompt tokens than its
    reference for the same prompt (uncached). Without a reference, the stream alone."""
    if s.error is not None or several(s):
        return None
    streamed = len(s.chunk_ends)
    said = s.completion_tokens
    if said is not None and s.streamed and said + slack < streamed:
        return f"usage says {said} completion tokens; {streamed} pieces were streamed"
    if ref is None:
        return None
    same_text = s.text == ref.text and ref.completion_tokens is not None and not _free_cuts(s)
    if said is not None and same_text and abs(said - (ref.completion_tokens or 0)) > slack:
        return (
            f"usage says {said} completion tokens for the text its serial reference "
            f"reported as {ref.completion_tokens}"
        )
    # A reference sent with a nonce in its prompt may count other prompt tokens.
    cold = not s.cached_tokens and not ref.cached_tokens and not _nonce(ref)
    same_prompt = s.prompt_digest is not None and s.prompt_digest == ref.prompt_digest
    # A reference that says 0 prompt tokens miscounts itself (vllm-mlx 0.4-0.5's simple
    # engine does for chat): nothing to hold the row against.
    known = s.prompt_tokens is not None and bool(ref.prompt_tokens)
    if cold and same_prompt and known and s.prompt_tokens != ref.prompt_tokens:
        return (
            f"usage says {s.prompt_tokens} prompt tokens; the same prompt had "
            f"{ref.prompt_tokens} when sent alone"
        )
    return None


# Tokens a reply may count that carry no text of their own: an end-of-sequence or other
# special token, a stop string's tokens held back from the text.
UNSEEN_TOKENS = 8


def _gaps(pieces: list[str], text: str) -> tuple[int, int, str] | None:
    """Where ``pieces`` lie in ``text``, each found whole and in order: the number of gaps
    between them (a trailing one only when it holds more than whitespace), the characters
    in those gaps, and the first gap's text; None when a piece is not found."""
    at = gaps = missing = 0
    first = ""
    for piece in pieces:
        found = text.find(piece, at)
        if found < 0:
            return None
        if found > at:
            gaps += 1
            missing += found - at
            first = first or text[at:found]
        at = found + len(piece)
    if text[at:].strip():
        gaps += 1
        missing += len(text) - at
        first = first or text[at:]
    return gaps, missing, first


def missing_pieces(s: SessionResult, ref: SessionResult, slack: int) -> str | None:
    """A stream that is its reference's text with pieces missing, while its usage counts
    the reference's whole length: deltas dropped from the stream (vllm-mlx with
    ``--stream-interval`` > 1 sends only every Nth token's text). Each streamed piece is found
    whole, in order, in the reference's text, with gaps between, and the stream carried
    fewer deltas than the tokens its usage counts (a server streaming one token a delta
    dropped none: a reply of its own tokens that skips some text is other text, diverged).
    A reply that says it generated less is not this (``ended_early``)."""
    if s.error is not None or not s.streamed or not s.pieces or s.text == ref.text or several(s):
        return None
    if s.prompt_digest != ref.prompt_digest:
        return None  # a later turn built from its own answers: another prompt, another text
    said = s.completion_tokens
    if said is None or len(s.pieces) + slack >= said or said + slack < tokens(ref):
        return None
    where = _gaps(s.pieces, ref.text)
    if where is None or not where[0]:
        return None
    gaps, missing, first = where
    return (
        f"its {len(s.pieces)} streamed pieces are its serial reference's text with {gaps} "
        f"gap(s), {missing} of {len(ref.text)} characters missing (the first: {first[:24]!r}), "
        f"while its usage says {s.completion_tokens} completion tokens (its reference "
        f"{ref.completion_tokens}): deltas were dropped from the stream"
    )


def _held(s: SessionResult) -> int:
    """The most tokens the streamed text can hold: a token carries at least one byte."""
    return len(s.text.encode()) + UNSEEN_TOKENS


def usage_beyond_stream(s: SessionResult, ref: SessionResult | None, slack: int) -> str | None:
    """Usage far above what the streamed text can hold: tokens went missing from the stream
    (dropped deltas) while the server counted them. A server that streams several tokens in
    one delta streams their text too, so it is held to the same bound.

    Over chat a reasoning parser streams the thinking outside the content and counts it, so
    there the reply is judged only against a reference whose own text held its usage; over
    completions every token is text. Where the reference's usage is beyond its text too,
    the server counts something it never streams for this item, alone as well."""
    said = s.completion_tokens
    if s.error is not None or not s.streamed or said is None or said <= _held(s) + slack:
        return None
    if several(s):
        return None  # its usage may count every choice's tokens
    if ref is None and s.situation is not None and s.situation.api == "chat":
        return None
    if ref is not None and (ref.completion_tokens or 0) > _held(ref) + slack:
        return None
    return (
        f"usage says {said} completion tokens; the stream holds {len(s.text.encode())} bytes "
        f"of text in {len(s.pieces)} pieces, and a token carries at least one byte: "
        "tokens went missing from the stream"
    )


def _nonce(s: SessionResult) -> bool:
    return s.situation is not None and s.situation.nonce is not None


def not_top1(s: SessionResult) -> str | None:
    """A greedy row whose chosen token was not its own top-1 (it was sampled)."""
    sit = s.situation
    if sit is None or sit.sampled or not s.top_logprobs:
        return None
    for index, token in enumerate(s.top_logprobs):
        best = max(token.alternatives, key=lambda a: a.logprob, default=None)
        if best is not None and token.logprob < best.logprob - 1e-3:
            return (
                f"token {index} {token.token!r} (logprob {token.logprob:.2f}) is not its top-1 "
                f"{best.token!r} ({best.logprob:.2f}): a greedy row was sampled"
            )
    return None


def situation(s: SessionResult) -> str:
    """The session's circumstances in words, for a reason line."""
    sit = s.situation
    if sit is None:
        return ""
    words = []
    if sit.copy_index:
        words.append(f"its copy {sit.copy_index + 1}")
    if sit.decoding_at_arrival:
        words.append(f"joined while {sit.decoding_at_arrival} were decoding (client's view)")
    elif sit.in_flight_at_arrival:
        words.append(f"sent with {sit.in_flight_at_arrival} in flight (client's view)")
    token = s.check.token if s.check is not None else None
    gone = [d for d in sit.departures if token is None or d.at_token <= token]
    if gone:
        last = gone[-1]
        words.append(
            f"after session {last.session} left at its token {last.at_token} "
            f"({last.in_flight} still in flight)"
        )
    if sit.params != "greedy":
        words.append(sit.params)
    if s.cached_tokens:
        words.append(f"{s.cached_tokens} prompt tokens cached")
    words.append(f"max_tokens {sit.max_tokens}, {s.prompt_tokens or '?'} prompt tokens, {sit.api}")
    return f" ({'; '.join(words)})"


def passed(s: SessionResult) -> bool | None:
    """The session's self-check; a recall session scored without one counts by its hit."""
    if s.check is not None:
        return s.check.passed
    return s.hit if s.workload == "recall" else None


@dataclass(frozen=True)
class Leak:
    """Another row's parameter in this answer: what it did (``kind``: whose parameter it
    was, stop, bias or penalty), in words, and the rows it came from."""

    kind: Literal["stop", "bias", "penalty", "constraint"]
    detail: str
    sources: list[int]


def beside(s: SessionResult, answers: Sequence[SessionResult]) -> list[SessionResult]:
    """The other answers of its arm (any shape: waves may overlap) sent before it ended:
    the rows whose parameters a batching bug could have run it with (those in flight with
    it, and those whose slot or sampler state it may have inherited)."""
    return [
        p for p in answers
        if p.session != s.session and p.situation is not None and p.start_s < s.end_s
    ]  # fmt: skip


def _ideal(s: SessionResult, ref: SessionResult | None) -> str | None:
    """The count a counting answer should be: its serial reference's (a passed one is its
    count) or, without one, the count its own first number starts."""
    if s.check is None or s.check.kind != "count":
        return None
    if ref is not None and passed(ref) and ref.text:
        return ref.text
    return count_ideal(s.text)


def _constrained_by(
    s: SessionResult, peers: Sequence[SessionResult], ref: SessionResult | None
) -> Leak | None:
    """An unconstrained row that answered as a constrained row beside it must (a JSON
    object of its schema, or a word of its grammar) where its reference did not."""
    sit = s.situation
    if sit is None or sit.constraint is not None:
        return None
    kind = looks_constrained(s.text)
    if kind is None or (ref is not None and looks_constrained(ref.text) is not None):
        return None
    sources = sorted(p.session for p in peers
                     if p.situation is not None and p.situation.constraint == kind)
    if not sources:
        return None
    return Leak("constraint", f"answered {s.text[:32]!r}, as the {kind} of session(s) "
                f"{', '.join(map(str, sources))} beside it allows, with no constraint of its "
                "own", sources)


def leaked_param(
    s: SessionResult, peers: Sequence[SessionResult], ref: SessionResult | None
) -> Leak | None:
    """Another row's stop string, logit bias or penalties applied to this answer, read from
    its text and named with that row (``peers``: those in flight with it, see ``beside``):

    - it stopped (finish 'stop') where its text goes on with another row's stop string that
      it never asked for (the params shape aims its stop row at a greedy neighbour's count);
    - it emits another row's biased token (twice in a row, or where its count broke);
    - its count broke, or ended, the way penalties break a count (see ``penalty_break``)
      while a row with penalties was in flight with it.
    """
    sit = s.situation
    if s.error is not None or sit is None:
        return None
    constrained = _constrained_by(s, peers, ref)
    if constrained is not None:
        return constrained
    ideal = _ideal(s, ref)
    if s.finish_reason == "stop":
        if ideal is not None and ideal.startswith(s.text):
            going_on = ideal[len(s.text):]
        elif ref is not None and ref.text.startswith(s.text):
            going_on = ref.text[len(s.text):]
        else:
            going_on = ""
        stops = {p.session: p.situation.stop for p in peers if p.situation is not None}
        sources = stop_sources(going_on, sit.stop, stops) if going_on else []
        if sources:
            return Leak("stop", f"stopped (finish 'stop') where its text goes on with "
                        f"{going_on[:12]!r}, at a stop string of session(s) "
                        f"{', '.join(map(str, sources))} that it never asked for", sources)
    broke = s.check is not None and not s.check.passed
    broke_at = sum(len(p) for p in s.pieces[: s.check.token or 0]) if broke and s.check else None
    biased = sorted(
        p.session for p in peers
        if p.situation is not None and p.situation.bias_text
        and p.situation.bias_text != sit.bias_text
        and shows_bias(s.text, p.situation.bias_text, broke_at)
    )  # fmt: skip
    if biased:
        words = sorted({p.situation.bias_text or "" for p in peers
                        if p.session in biased and p.situation is not None})
        return Leak("bias", f"emits {', '.join(map(repr, words))}, the token session(s) "
                    f"{', '.join(map(str, biased))} biased toward: {s.text[:32]!r}", biased)
    penalised = sorted(p.session for p in peers if p.situation and p.situation.role == "penalty")
    if ideal is None or not penalised or sit.role == "penalty":
        return None
    mark = penalty_break(s.text, ideal, s.finish_reason == "stop")
    if mark is None:
        return None
    return Leak("penalty", f"its count broke as penalties break one ({mark}), in flight with "
                f"the penalties of session(s) {', '.join(map(str, penalised))}", penalised)
